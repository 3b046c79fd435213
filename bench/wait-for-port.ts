import { connect } from 'node:net'

/** Resolves once 127.0.0.1:`port` accepts a connection, polling every 2 ms until `deadlineMs`. */
export function waitForPort(port: number, deadlineMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const attempt = (): void => {
      const socket = connect({ host: '127.0.0.1', port }, () => {
        socket.destroy()
        resolve()
      })
      socket.on('error', () => {
        socket.destroy()
        if (Date.now() > deadlineMs) reject(new Error(`port ${port} never accepted`))
        else setTimeout(attempt, 2)
      })
    }
    attempt()
  })
}
