import Glibc
import OStackCLI
import PlatformKit

@main
struct OStackMain {
    static func main() async {
        // Harden the process before anything else runs: umask 077, not dumpable, no core files.
        ProcessHardening.apply()
        let arguments = Array(CommandLine.arguments.dropFirst())
        // A few command lines are answered without the argument parser (EarlyCommand.swift).
        EarlyCommand.runIfMatched(arguments)
        exit(await CommandLineMain.run(arguments))
    }
}
