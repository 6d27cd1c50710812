import Glibc

/// Crash injection for the kill-at-every-step tests (docs/testing.md).
///
/// In debug builds, `FailPoint.hit("login.after-copy")` kills the process with SIGKILL when the
/// environment variable `OSTACK_FAILPOINT` names that point — exactly what `kill -9` at that moment
/// would do. Release builds compile it to nothing.
public enum FailPoint {
    public static func hit(_ name: StaticString) {
        #if DEBUG
            guard let raw = getenv("OSTACK_FAILPOINT") else { return }
            if String(cString: raw) == name.description {
                kill(getpid(), SIGKILL)
            }
        #endif
    }
}
