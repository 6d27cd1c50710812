import Glibc

/// Crash injection for the kill-at-every-step tests (docs/testing.md).
///
/// In debug builds, `FailPoint.hit("login.after-copy")` kills the process with SIGKILL when the
/// environment variable `OSTACK_FAILPOINT` names that point — exactly what `kill -9` at that moment
/// would do — and `OSTACK_FAILPOINT=pause:<point>` holds the process there for two seconds (for
/// races with another process). With `OSTACK_FAILPOINT_MARK` naming a file as well, the pause
/// creates that file first, so a test can wait until the process is inside the pause instead of
/// guessing how long it takes to get there. Release builds compile it to nothing.
public enum FailPoint {
    public static func hit(_ name: StaticString) {
        #if DEBUG
            guard let raw = getenv("OSTACK_FAILPOINT") else { return }
            let asked = String(cString: raw)
            if asked == name.description {
                kill(getpid(), SIGKILL)
            } else if asked == "pause:" + name.description {
                if let mark = getenv("OSTACK_FAILPOINT_MARK") {
                    close(open(mark, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600))
                }
                sleep(2)
            }
        #endif
    }
}
