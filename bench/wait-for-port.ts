import { connect, createServer } from 'node:net'

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

/** A port the OS handed out just now (the process spawned next binds it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}
