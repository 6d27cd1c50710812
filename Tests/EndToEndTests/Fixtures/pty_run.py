#!/usr/bin/env python3
"""Runs a command on a pseudo-terminal, as a person at a terminal would.

Usage: pty_run.py [--cols N] [--rows N] [--on TEXT --type ANSWER]... [ANSWER] -- COMMAND [ARG...]
       pty_run.py ANSWER COMMAND [ARG...]          (the first form's `--on "[y/N]" --type ANSWER`)

The terminal is --cols wide and --rows high (default 80 x 24). Each time the output shows the next
--on TEXT (after the previous one), its ANSWER and a newline are typed (`^C`: Ctrl-C alone). Prints everything the command
wrote to the terminal, then exits with its exit code."""
import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time

args = sys.argv[1:]
cols, rows, script = 80, 24, []
if args and args[0].startswith("--"):
    while args and args[0] != "--":
        flag, value = args[0], args[1]
        args = args[2:]
        if flag == "--cols":
            cols = int(value)
        elif flag == "--rows":
            rows = int(value)
        elif flag == "--on":
            script.append([value.encode(), None])
        elif flag == "--type":
            script[-1][1] = value.encode()
        else:
            sys.exit("pty_run.py: unknown flag " + flag)
    argv = args[1:]
else:
    script = [[b"[y/N]", args[0].encode()]]
    argv = args[1:]

pid, fd = pty.fork()
if pid == 0:  # the size is set before the command starts, so it reads the right one
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.execvp(argv[0], argv)
output = b""
seen = 0  # how much of the output the last answer has consumed
status = None
deadline = time.time() + float(os.environ.get("PTY_RUN_DEADLINE", "60"))
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
        if script:
            at = output.find(script[0][0], seen)
            if at >= 0:  # "^C" types Ctrl-C (the terminal sends SIGINT), anything else a line
                os.write(fd, b"\x03" if script[0][1] == b"^C" else script[0][1] + b"\n")
                seen = at + len(script[0][0])
                script.pop(0)
    else:
        done, waited = os.waitpid(pid, os.WNOHANG)
        if done:
            status = waited
            break
if status is None and time.time() >= deadline:  # still running: stopped, and what it printed is shown
    os.kill(pid, 9)
    output += b"\n[pty_run: killed at the deadline]"
if status is None:
    _, status = os.waitpid(pid, 0)
sys.stdout.write(output.decode("utf-8", "replace"))
sys.exit(os.waitstatus_to_exitcode(status))
