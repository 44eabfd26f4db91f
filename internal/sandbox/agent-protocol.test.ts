/**
 * The agent's frames, without a container: what agentd refuses to send, and what it
 * refuses to accept from a broken or hostile peer.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isAgentdError } from "../errors.ts";
import {
  type Frame,
  FrameReader,
  frame,
  HEADER_BYTES,
  MAX_RECEIVE,
  MAX_SEND,
  parseExit,
  startFrame,
} from "./agent-protocol.ts";

const start = (over: Partial<Parameters<typeof startFrame>[1]> = {}) =>
  startFrame(7, {
    argv: ["sh", "-c", "echo hi"],
    cwd: "/workspace",
    env: { A: "1" },
    timeoutMs: 1500,
    maxOutputBytes: 4096,
    stdin: false,
    ...over,
  });

describe("agent frames", () => {
  it("a start frame carries the limits, then cwd, argv and env as NUL-ended strings", () => {
    const f = start({ stdin: true });
    assert.equal(f.toString("latin1", 0, 1), "S");
    assert.equal(f.readUInt32BE(1), 7);
    assert.equal(f.readUInt32BE(5), f.length - HEADER_BYTES);
    const p = f.subarray(HEADER_BYTES);
    assert.deepEqual(
      [p.readUInt32BE(0), p.readUInt32BE(4), p[8], p.readUInt16BE(9), p.readUInt16BE(11)],
      [1500, 4096, 1, 3, 1],
    );
    assert.equal(p.subarray(13).toString(), "/workspace\0sh\0-c\0echo hi\0A=1\0");
  });

  it("flags: 4 private pipes, 8 the HOME entries listed for the containment scan", () => {
    const flags = (over: Parameters<typeof start>[0]) => start(over)[HEADER_BYTES + 8];
    assert.equal(flags({}), 0);
    assert.equal(flags({ private: true }), 4);
    assert.equal(flags({ homes: true }), 8);
    assert.equal(flags({ homes: true, private: true, stdin: true }), 13);
  });

  it("refuses what the agent would split differently: NUL bytes, '=' in a name, an empty name", () => {
    const bads: Partial<Parameters<typeof startFrame>[1]>[] = [
      { argv: ["a\0b"] },
      { cwd: "/work\0space" },
      { env: { A: "x\0y" } },
      { env: { "A=B": "x" } },
      { env: { "": "x" } },
      { cwdWithin: "/work\0space" },
    ];
    for (const bad of bads)
      assert.throws(
        () => start(bad),
        (err) => isAgentdError(err, "EVALIDATION"),
        JSON.stringify(bad),
      );
  });

  it("refuses to send a frame past MAX_SEND", () => {
    assert.throws(
      () => frame("I", 1, new Uint8Array(MAX_SEND + 1)),
      (err) => isAgentdError(err, "ETOOLARGE"),
    );
    assert.equal(frame("I", 1, new Uint8Array(MAX_SEND)).length, MAX_SEND + HEADER_BYTES);
  });

  it("reassembles frames split anywhere, byte by byte", () => {
    const stream = Buffer.concat([
      frame("O", 1, Buffer.from("hello")),
      frame("R", 2, Buffer.from("")),
      frame("X", 1, Buffer.from([0, 0, 0, 3, 16])),
    ]);
    const got: Frame[] = [];
    const r = new FrameReader();
    for (let i = 0; i < stream.length; i++)
      r.push(stream.subarray(i, i + 1), (f) => got.push({ ...f, payload: Buffer.from(f.payload) }));
    assert.deepEqual(
      got.map((f) => [f.type, f.id, f.payload.toString("hex")]),
      [
        ["O", 1, Buffer.from("hello").toString("hex")],
        ["R", 2, ""],
        ["X", 1, "0000000310"],
      ],
    );
    assert.deepEqual(parseExit(got[2]?.payload as Buffer), { code: 3, flags: 16, message: "" });
  });

  it("a peer announcing a frame past MAX_RECEIVE breaks the channel before anything is buffered", () => {
    const head = Buffer.alloc(HEADER_BYTES);
    head.write("O", 0, "latin1");
    head.writeUInt32BE(MAX_RECEIVE + 1, 5);
    assert.throws(() => new FrameReader().push(head, () => undefined), /frame of/);
  });

  it("an exit frame too short to hold a status is refused", () => {
    assert.throws(() => parseExit(Buffer.from([0, 0, 0])), /short exit frame/);
    assert.deepEqual(parseExit(Buffer.from([255, 255, 255, 255, 4, 0x68, 0x69])), {
      code: -1,
      flags: 4,
      message: "hi",
    });
  });
});
