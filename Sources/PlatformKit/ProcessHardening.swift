internal import CPlatform
import Glibc

/// Start-up hardening of the `ostack` process (docs/security.md#sod-8, #sqlc-5).
///
/// - `umask(077)`: every file and directory we create is private to the user.
/// - `PR_SET_DUMPABLE=0`: no core dumps and no `ptrace` attach by other same-uid processes.
/// - `RLIMIT_CORE=0`: belt and braces for core files.
public enum ProcessHardening {
    /// Applies all hardening steps. Failures are ignored on purpose: none of them may stop the
    /// program, and each is checked by `status()` (and by `ostack doctor`).
    public static func apply() {
        umask(0o077)
        _ = cplatform_set_non_dumpable()
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
    }

    /// What the hardening looks like right now, for tests and diagnostics.
    public struct Status: Equatable, Sendable {
        public var umask: UInt32
        public var dumpable: Bool
        public var coreLimit: UInt64
    }

    public static func status() -> Status {
        let current = umask(0o077)  // umask has no getter: set, then restore
        umask(current)
        var limit = rlimit()
        _ = getrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
        return Status(
            umask: UInt32(current), dumpable: cplatform_get_dumpable() != 0, coreLimit: UInt64(limit.rlim_cur))
    }
}
