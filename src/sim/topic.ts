/** The simulated workload's topic (its own module so that mutations.ts need not import world-view.ts). */
export const TOPIC = 'sim'
