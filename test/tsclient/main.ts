// A client generated from the OpenAPI document a simlock daemon serves, and
// nothing else: openapi-typescript writes ./simlock.ts from the unmodified
// document, openapi-fetch sends the requests, and tsc checks this file in
// strict mode. TestTypeScriptClientLeasesADevice (test/e2e) generates,
// compiles and runs it against a real daemon.
//
// Usage: node main.js <base URL> <agent token>. It prints one JSON line with
// what it saw and exits non-zero on the first surprise.
import createClient from "openapi-fetch";
import type { components, paths } from "./simlock.js";

// The few Node globals used here, declared rather than pulling in
// @types/node: the program needs nothing else from Node.
declare const process: {
  argv: string[];
  exitCode?: number;
  stdout: { write(s: string): boolean };
  stderr: { write(s: string): boolean };
};

type Lease = components["schemas"]["Lease"];

interface Report {
  leaseId: string;
  deviceId: string;
  platform: string;
  expiresAt: string;
  polls: number;
  released: boolean;
  afterCode: string;
  streamContentType: string;
  streamFirstLine: string;
  streamLastLine: string;
}

async function run(base: string, token: string): Promise<Report> {
  const c = createClient<paths>({ baseUrl: base, headers: { Authorization: `Bearer ${token}` } });

  // POST /v1/leases answers 201 with the Lease or 202 with a handle to
  // long-poll, so data is their union; "leaseId" in data tells them apart.
  const asked = await c.POST("/v1/leases", {
    params: { header: { Prefer: "wait=30" } },
    body: { platform: "ios", requesterId: "tsclient" },
  });
  if (asked.error !== undefined) {
    throw new Error(`lease request: ${asked.response.status} ${asked.error.error.code}: ${asked.error.error.message}`);
  }
  let answer = asked.data;
  let polls = 0;
  while (!("leaseId" in answer)) {
    polls++;
    const polled = await c.GET("/v1/requests/{id}", {
      params: { path: { id: answer.requestId }, query: { wait: 30 } },
    });
    if (polled.error !== undefined) {
      throw new Error(`poll: ${polled.response.status} ${polled.error.error.code}`);
    }
    answer = polled.data;
  }
  const lease: Lease = answer;

  // The read has one answer, the Lease: data.expiresAt needs no type
  // argument and no narrowing beyond "it did not fail".
  const read = await c.GET("/v1/leases/{id}", { params: { path: { id: lease.leaseId } } });
  if (read.data === undefined) {
    throw new Error(`lease get: ${read.response.status} ${read.error?.error.code}`);
  }
  const expiresAt: string = read.data.expiresAt;
  if (read.data.deviceId !== lease.deviceId || Number.isNaN(Date.parse(expiresAt))) {
    throw new Error(`lease get answered ${JSON.stringify(read.data)}`);
  }

  // The stream twin is an operation of its own, answered as NDJSON lines:
  // the command's output, then the result.
  const streamed = await c.POST("/v1/leases/{id}/exec:stream", {
    params: { path: { id: lease.leaseId } },
    // `as const` keeps "simctl" a literal while TypeScript infers the
    // options: widened to string, the body would not match the Tool enum,
    // inference would fall back to the declared options type, and data
    // would lose the parseAs: "text" typing (an openapi-fetch quirk).
    body: { tool: "simctl" as const, args: ["getenv", "{udid}", "SIMULATOR_UDID"], requesterId: "tsclient" },
    parseAs: "text",
  });
  if (streamed.data === undefined) {
    throw new Error(`exec stream: ${streamed.response.status} ${streamed.error?.error.code}`);
  }
  const lines = streamed.data.trim().split("\n");

  const released = await c.DELETE("/v1/leases/{id}", { params: { path: { id: lease.leaseId } } });
  if (released.data === undefined) {
    throw new Error(`lease release: ${released.response.status} ${released.error?.error.code}`);
  }

  // A refusal decodes as the typed error body.
  const after = await c.GET("/v1/leases/{id}", { params: { path: { id: lease.leaseId } } });
  if (after.error === undefined) {
    throw new Error(`lease get after release: ${after.response.status}, no error`);
  }

  return {
    leaseId: lease.leaseId,
    deviceId: read.data.deviceId,
    platform: read.data.platform,
    expiresAt,
    polls,
    released: released.data.released,
    afterCode: after.error.error.code,
    streamContentType: streamed.response.headers.get("Content-Type") ?? "",
    streamFirstLine: lines[0] ?? "",
    streamLastLine: lines[lines.length - 1] ?? "",
  };
}

const [base, token] = process.argv.slice(2);
if (base === undefined || token === undefined) {
  process.stderr.write("usage: node main.js <base URL> <token>\n");
  process.exitCode = 2;
} else {
  run(base, token).then(
    (rep) => process.stdout.write(JSON.stringify(rep) + "\n"),
    (err: unknown) => {
      process.stderr.write(`tsclient: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
