internal import CPlatform
import Glibc

/// Starts a detached background process (its own session, stdio on /dev/null, no other inherited
/// file, `/` as its working directory).
public enum Daemon {
    public static func spawn(executable: String, arguments: [String], environment: [String: String])
        throws(PlatformError)
    {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in 0...2 {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        // Nothing of the caller's beyond that: no other open file (a pipe's reader would wait for an
        // end of file for as long as the daemon lives) and not its working directory (a mounted
        // stick could not be unmounted). The executable is an absolute path.
        cplatform_spawn_addclosefrom(&actions, 3)
        if executable.hasPrefix("/") { cplatform_spawn_addchdir(&actions, "/") }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        cplatform_spawnattr_setsid(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw PlatformError(.open, errno: rc, path: executable) }
    }

    /// This executable's path (`/proc/self/exe`).
    public static var currentExecutable: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, Int(PATH_MAX))
        return n > 0 ? String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "ostack"
    }
}
