internal import CPlatform
import Glibc

/// Starting a child process with some of its standard descriptors replaced (a pager, a filter such
/// as jq). The pipes are close-on-exec, so a child gets only the descriptors it is given.
public enum Spawn {
    /// A pipe whose ends are close-on-exec: (read, write), or nil.
    public static func pipe() -> (read: Int32, write: Int32)? {
        var fds: [Int32] = [-1, -1]
        guard cplatform_pipe_cloexec(&fds) == 0 else { return nil }
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
        for (child, ours) in descriptors { posix_spawn_file_actions_adddup2(&actions, ours, child) }
        let words = [executable] + arguments
        let argv = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid = Int32(0)
        return posix_spawn(&pid, executable, &actions, nil, argv, envp) == 0 ? pid : nil
    }
}
