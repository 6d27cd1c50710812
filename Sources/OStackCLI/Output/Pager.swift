import Glibc
import PlatformKit

/// Long output on a terminal goes through a pager, as with git and gh: `OSTACK_PAGER`, else `PAGER`,
/// else `less`, run by `/bin/sh -c` with `LESS=FRX` unless `LESS` is set (quit when it fits one
/// screen, keep colours, leave the text on the screen). Never when stdout is not a terminal, under
/// `--json`, or when the pager is set to `` or `cat`. Once started, stdout is the pager's input
/// for the rest of the command; `finish()` closes it and waits for the pager to quit.
enum Pager {
    nonisolated(unsafe) private static var child: pid_t?
    /// The SIGINT and SIGQUIT handlers to put back when the pager is done.
    nonisolated(unsafe) private static var interrupt: SignalDisposition.Previous = .none
    nonisolated(unsafe) private static var quit: SignalDisposition.Previous = .none

    /// Starts the pager when the output is for a person at a terminal; does nothing otherwise.
    static func start(context: CommandContext) {
        guard child == nil, context.terminal.stdoutIsTerminal, !context.global.json,
            context.terminal.defaultFormat == .table
        else { return }
        let environment = context.environment
        let configured = environment["OSTACK_PAGER"] ?? environment["PAGER"]
        let command = (configured ?? "less").trimmingWhitespace()
        guard !command.isEmpty, command != "cat" else { return }
        // A pager that is not there (no `less` on a minimal system, a typo in PAGER) would take the
        // output with it: `sh` says "not found" and everything written to it is lost. Printed
        // directly instead; a pager the user chose is named.
        guard Self.canRun(command, path: environment["PATH"], home: environment["HOME"]) else {
            if configured != nil {
                context.terminal.err(
                    "ostack: warning: the pager '\(ErrorPresenter.sanitize(command, maxLength: 80))' was not found; "
                        + "printing without one.\n")
            }
            return
        }
        guard let pipe = Spawn.pipe() else { return }
        var childEnvironment = environment
        if childEnvironment["LESS"] == nil { childEnvironment["LESS"] = "FRX" }
        if childEnvironment["LV"] == nil { childEnvironment["LV"] = "-c" }
        let started = Spawn.start(
            "/bin/sh", ["-c", command], environment: childEnvironment, descriptors: [STDIN_FILENO: pipe.read])
        close(pipe.read)
        guard let pid = started else {
            close(pipe.write)
            return
        }
        // A pager that quits early (`q` in less) must not kill ostack with SIGPIPE: writes fail
        // with EPIPE instead and the rest of the output is dropped.
        signal(SIGPIPE, SIG_IGN)
        // Ctrl-C and Ctrl-\ belong to the pager while it runs (as with git): ostack must not exit and
        // leave it holding the terminal.
        interrupt = SignalDisposition.replace(SIGINT, with: SIG_IGN)
        quit = SignalDisposition.replace(SIGQUIT, with: SIG_IGN)
        dup2(pipe.write, STDOUT_FILENO)
        close(pipe.write)
        child = pid
    }

    /// Whether the pager's program can be started: its first word found as an executable (itself
    /// when it names a path, else on `PATH`). A command line that starts with shell syntax (an
    /// assignment, quotes, a builtin) is taken as runnable: the shell knows better.
    static func canRun(_ command: String, path: String?, home: String? = nil) -> Bool {
        guard var first = command.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.map(String.init) else {
            return false
        }
        // `~/bin/pager`, as the shell expands it.
        if first.hasPrefix("~/"), let home, home.hasPrefix("/") { first = home + first.dropFirst() }
        if first.hasPrefix("~") { return true }  // `~user/…`: the shell knows
        if first.contains("=") || first.contains("'") || first.contains("\"") || first.contains("$")
            || ["exec", "command", "eval", "."].contains(first)
        {
            return true
        }
        if first.contains("/") { return access(first, X_OK) == 0 }
        let directories = (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":").map(String.init)
        return directories.contains { !$0.isEmpty && access($0 + "/" + first, X_OK) == 0 }
    }

    /// Ends the pager's input and waits until the person has quit it.
    static func finish() {
        guard let pid = child else { return }
        child = nil
        close(STDOUT_FILENO)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // Exit 126 or 127 from the shell: the pager could not be run after all, and took the output.
        let exited = status & 0x7f == 0
        let code = (status >> 8) & 0xff
        if exited && (code == 126 || code == 127) {
            Terminal.write(
                STDERR_FILENO,
                "ostack: warning: the pager could not be run (exit \(code)); the output was lost. "
                    + "Set OSTACK_PAGER (empty for none).\n")
        }
        SignalDisposition.restore(SIGINT, interrupt)
        SignalDisposition.restore(SIGQUIT, quit)
        interrupt = .none
        quit = .none
    }
}
