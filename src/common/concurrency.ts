/** Bounded concurrency for I/O-bound loops over many partitions. */

/** Runs `task` over `items` with at most `limit` running; rejects with the first failure once all settled. */
export async function forEachConcurrently<T>(
  items: readonly T[],
  limit: number,
  task: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0
  let failure: { error: unknown } | undefined
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++
      try {
        await task(items[i], i)
      } catch (error) {
        failure ??= { error }
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  if (failure !== undefined) throw failure.error
}
