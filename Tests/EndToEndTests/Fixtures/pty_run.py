#!/usr/bin/env python3
"""Runs a command on a pseudo-terminal, as a person at a terminal would.
Usage: pty_run.py ANSWER COMMAND [ARG...]. When the command's output shows "[y/N]", ANSWER and a
newline are typed. Prints everything the command wrote to the terminal, then exits with its
exit code."""
import os
import pty
import select
import sys
import time

answer, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)
output = b""
answered = False
status = None
deadline = time.time() + 60
while time.time() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.1)
    if ready:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
        if not answered and b"[y/N]" in output:
            os.write(fd, answer.encode() + b"\n")
            answered = True
    else:
        done, waited = os.waitpid(pid, os.WNOHANG)
        if done:
            status = waited
            break
if status is None:
    _, status = os.waitpid(pid, 0)
sys.stdout.write(output.decode("utf-8", "replace"))
sys.exit(os.waitstatus_to_exitcode(status))
