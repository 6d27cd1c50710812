internal import CPlatform
import Glibc

/// Starting a child process with some of its standard descriptors replaced (a pager, a filter such
/// as jq). The child inherits only the descriptors it is given: everything from 3 up is closed in it.
public enum Spawn {
    /// A pipe whose ends are close-on-exec: (read, write), or nil.
    /// Both ends are 3 or above (when stdin, stdout or stderr is closed, a new descriptor could
    /// otherwise take its number, and one dup2 into the child would undo another).
    public static func pipe() -> (read: Int32, write: Int32)? {
        var fds: [Int32] = [-1, -1]
        guard cplatform_pipe_cloexec(&fds) == 0 else { return nil }
        for index in 0..<2 where fds[index] < 3 {
            let moved = fcntl(fds[index], F_DUPFD_CLOEXEC, 3)
            close(fds[index])
            fds[index] = moved
        }
        guard fds[0] >= 3, fds[1] >= 3 else {
            for fd in fds where fd >= 0 { close(fd) }
            return nil
        }
        return (fds[0], fds[1])
    }

    /// Starts `executable` with `arguments` and `environment`; `descriptors` maps the child's
    /// standard descriptors to ours (e.g. `[0: pipe.read]`). Returns its pid, or nil.
    public static func start(
        _ executable: String, _ arguments: [String], environment: [String: String], descriptors: [Int32: Int32]
    ) -> Int32? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (child, ours) in descriptors.sorted(by: { $0.key < $1.key }) {
            posix_spawn_file_actions_adddup2(&actions, ours, child)
        }
        cplatform_spawn_addclosefrom(&actions, 3)
        let words = [executable] + arguments
        let argv = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid = Int32(0)
        return posix_spawn(&pid, executable, &actions, nil, argv, envp) == 0 ? pid : nil
    }
}
