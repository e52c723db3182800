// Drives a leased emulator through the adb server protocol with Tango's
// client library: list devices, run a shell command under shell protocol
// v2, push a file and pull it back. Prints one JSON object.
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { AdbServerClient } from "@yume-chan/adb";
import { AdbServerNodeTcpConnector } from "@yume-chan/adb-server-node-tcp";

const [port, serial, localFile, remotePath] = process.argv.slice(2);
const client = new AdbServerClient(new AdbServerNodeTcpConnector({ host: "127.0.0.1", port: Number(port) }));
const out = {};
const devices = await client.getDevices();
out.devices = devices.map((d) => ({ serial: d.serial, state: d.state, model: d.model ?? "", product: d.product ?? "" }));
const adb = await client.createAdb({ serial });
const shell = adb.subprocess.shellProtocol;
out.shellProtocol = shell !== undefined;
if (shell) {
  const r = await shell.spawnWaitText("getprop ro.product.model; ls /simlock-no-such-dir; exit 7");
  out.shell = { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode };
}
const data = readFileSync(localFile);
const sync = await adb.sync();
try {
  await sync.write({
    filename: remotePath,
    file: new ReadableStream({ start(c) { c.enqueue(new Uint8Array(data)); c.close(); } }),
    permission: 0o644,
  });
  const st = await sync.stat(remotePath);
  out.stat = { size: Number(st.size), mode: st.mode };
  const chunks = [];
  const reader = sync.read(remotePath).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(Buffer.from(value));
  }
  const pulled = Buffer.concat(chunks);
  out.pushed = createHash("sha256").update(data).digest("hex");
  out.pulled = createHash("sha256").update(pulled).digest("hex");
  out.pulledBytes = pulled.length;
} finally {
  await sync.dispose();
}
await adb.close();
console.log(JSON.stringify(out));
