#!/usr/bin/env python3
"""Minimal offline stand-in for a Carton runner (runner interface v1).

It behaves like carton's own `carton-runner-noop` for Pack requests: it answers
Pack{input_path,...} with output_path=input_path, so the core library's
format::v1::save() zips the input directory verbatim as `model/`.
Wire protocol (source/carton-runner-interface/src/do_not_modify/{comms,framed,types}.rs):
  * connect to the UDS given by --uds-path; receive fds via SCM_RIGHTS, each
    tagged by an 8-byte little-endian FdId (0 = Rpc channel, 1 = FileSystem)
  * on the Rpc channel: frames = u64 big-endian length + bincode(1.x, fixint, LE)
  * RPCRequest{id:u64, data: enum(u32 tag)}; Pack is tag 1: fs:u64, input_path:str, temp_folder:str
  * RPCResponse{id:u64, complete:bool, data: enum(u32 tag)}; Pack is tag 1: output_path:str; Load is tag 0
"""
import os
import socket
import struct
import sys

# RPCResponse gained a `complete: bool` field on 2023-09-27 (commit ed6787d).
# cartonml 0.0.1.dev20230823 (PyPI "cartonml") predates it; cartonml-nightly 0.0.1.dev20231020 has it.
WITH_COMPLETE = os.environ.get("CARTON_SHIM_COMPLETE", "0") == "1"

uds = sys.argv[sys.argv.index("--uds-path") + 1]
boot = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
boot.connect(uds)

fds = {}
while 0 not in fds:
    data, anc, _flags, _addr = boot.recvmsg(8, socket.CMSG_SPACE(struct.calcsize("i")))
    if not data:
        sys.exit(0)
    fd_id = struct.unpack("<Q", data)[0]
    for level, typ, cdata in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds[fd_id] = struct.unpack("i", cdata[:4])[0]

rpc = socket.socket(fileno=fds[0])
rpc.setblocking(True)

def read_exact(n):
    buf = b""
    while len(buf) < n:
        chunk = rpc.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf

def read_str(b, off):
    (n,) = struct.unpack_from("<Q", b, off); off += 8
    return b[off:off + n].decode(), off + n

def enc_str(s):
    e = s.encode()
    return struct.pack("<Q", len(e)) + e

def resp(req_id, tag):
    return struct.pack("<QBI", req_id, 1, tag) if WITH_COMPLETE else struct.pack("<QI", req_id, tag)

def send(payload):
    rpc.sendall(struct.pack(">Q", len(payload)) + payload)

while True:
    try:
        (size,) = struct.unpack(">Q", read_exact(8))
    except EOFError:
        break
    msg = read_exact(size)
    req_id, tag = struct.unpack_from("<QI", msg, 0)
    if tag == 1:  # Pack
        off = 12 + 8  # skip fs token (StreamID u64)
        input_path, off = read_str(msg, off)
        temp_folder, off = read_str(msg, off)
        if os.path.isdir(input_path):
            # like carton-runner-noop / rust-bert / python runners: the folder becomes `model/` as-is
            out = input_path
        else:
            # like carton-runner-torch (model.pt) / carton-runner-wasm (model.wasm): symlink the single
            # file into temp_folder; save() stores out-of-tree symlinks as regular files
            os.symlink(input_path, os.path.join(temp_folder, os.environ.get("CARTON_SHIM_FILE_NAME", "model.pt")))
            out = temp_folder
        send(resp(req_id, 1) + enc_str(out))
    elif tag == 0:  # Load -> Load (ack only; no inference support)
        send(resp(req_id, 0))
    else:  # Error{e}
        send(resp(req_id, 4) + enc_str("shim runner: only Pack/Load supported"))

# Drain anything still queued on the bootstrap socket (e.g. the FileSystem channel fd) before exiting;
# closing with unread data makes the library's fd-reader task panic with ECONNRESET.
boot.setblocking(False)
try:
    while True:
        d, anc, _f, _a = boot.recvmsg(8, socket.CMSG_SPACE(struct.calcsize("i")))
        if not d:
            break
except (BlockingIOError, ConnectionResetError):
    pass
