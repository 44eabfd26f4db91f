/** Listening on HOST:PORT for any of agentd's servers (API, health port, egress proxy). */
import type net from "node:net";

/** Listens; resolves with the bound address (rejects with the listen error: EADDRINUSE…). */
export function listenOn(server: net.Server, host: string, port: number): Promise<net.AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server.address() as net.AddressInfo);
    });
  });
}
