/**
 * One series of a server's per-tenant metrics (`GET /metrics/tenants`, admin only) as a
 * number, for tests. Must never: read the public /metrics (tenant ids are not there).
 */
export async function tenantMetric(
  serverUrl: string,
  adminToken: string,
  name: string,
  tenant: string,
  limit: string,
): Promise<number | undefined> {
  const res = await fetch(`${serverUrl}/metrics/tenants`, {
    headers: { authorization: `Bearer ${adminToken}` },
  });
  const text = await res.text();
  const line = text
    .split("\n")
    .find(
      (l) =>
        l.startsWith(`${name}{`) &&
        l.includes(`tenant="${tenant}"`) &&
        l.includes(`limit="${limit}"`),
    );
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}
