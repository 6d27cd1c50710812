import Dispatch
import Glibc
import OStackCLI
import PlatformKit

@main
struct OStackMain {
    /// Synchronous on purpose: the command lines answered early (`status --short` at every shell
    /// prompt) run before Swift's concurrency runtime starts; every other command runs as a task.
    static func main() {
        // Harden the process before anything else runs: umask 077, not dumpable, no core files.
        ProcessHardening.apply()
        // A reader that stops early (`| head -1`) must not kill ostack: with SIGPIPE at its default
        // it did (exit 141, failing `set -o pipefail` scripts) unless GLib's D-Bus code happened to
        // ignore it first, as it does when the Secret Service is used; with the file keyring, and
        // for `completion`, it did not. Writes to a closed stdout fail with EPIPE instead, and the
        // rest of the output is dropped (Terminal.write; the export stops there).
        signal(SIGPIPE, SIG_IGN)
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let position = CommandLineMain.firstArgumentNotUTF8() {
            exit(CommandLineMain.refuseArgumentNotUTF8(at: position, arguments: arguments))
        }
        // A few command lines are answered without the argument parser (EarlyCommand.swift).
        EarlyCommand.runIfMatched(arguments)
        Task { exit(await CommandLineMain.runAsProcess(arguments)) }
        dispatchMain()
    }
}
