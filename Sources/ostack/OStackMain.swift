import Glibc
import OStackCLI
import PlatformKit

@main
struct OStackMain {
    static func main() async {
        // Harden the process before anything else runs: umask 077, not dumpable, no core files.
        ProcessHardening.apply()
        exit(await CommandLineMain.run(Array(CommandLine.arguments.dropFirst())))
    }
}
