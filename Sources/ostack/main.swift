import OStackCLI
import PlatformKit

// Harden the process before anything else runs: umask 077, not dumpable, no core files.
ProcessHardening.apply()

await OStackCommand.main()
