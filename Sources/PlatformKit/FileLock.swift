import Glibc

/// An exclusive advisory lock (`flock`) on a lock file, used for cross-process single flight
/// (token refresh and rotation, migrations, sync claims). The kernel drops the lock when the
/// process dies, so `kill -9` never leaves a stale lock behind.
public final class FileLock: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is immutable after init and released once in deinit.
    private let fd: Int32
    public let path: String

    /// Acquires the lock, waiting at most `timeout` seconds (polling every 10 ms).
    /// Throws `PlatformError(.lock, errno: EWOULDBLOCK)` when the wait runs out. A symbolic link at
    /// `path` is never followed (`O_NOFOLLOW`: `ELOOP`, docs/security.md#fs-2).
    public init(path: String, timeout: Double) throws(PlatformError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, SecureFileSystem.fileMode)
        guard fd >= 0 else { throw PlatformError(.open, errno: errno, path: path) }
        var waited = 0.0
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let error = errno
            if error == EINTR { continue }
            guard error == EWOULDBLOCK, waited < timeout else {
                close(fd)
                throw PlatformError(.lock, errno: error, path: path)
            }
            usleep(10_000)
            waited += 0.01
        }
        self.fd = fd
        self.path = path
    }

    /// Runs `body` while holding the lock.
    public static func withLock<R, E: Error>(
        path: String, timeout: Double, _ body: () throws(E) -> R
    ) throws -> R {
        let lock = try FileLock(path: path, timeout: timeout)
        defer { withExtendedLifetime(lock) {} }
        return try body()
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
