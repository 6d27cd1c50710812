import Glibc
import OStackCore

/// A file written beside its final name (`FILE.partial-<random>`) until it is complete: an export
/// stopped by Ctrl-C, `kill` or a closed terminal (SIGINT, SIGTERM, SIGHUP) removes it before the
/// process ends (exit 130 for SIGINT, else 143 / 129), so no partial copy — a plaintext database
/// among them — is left under a name nothing will clean up; nor the SQLite journal beside an
/// `export-database` copy. Errors remove both through the writer's own cleanup. One at a time per
/// process; the paths are copied once into memory that is never freed, so the handler reads
/// stable memory and calls only `unlink` and `_exit`.
enum PartialFile {
    nonisolated(unsafe) private static var path: UnsafeMutablePointer<CChar>?
    /// `path` + `-journal`: the rollback journal SQLite keeps beside an `export-database` copy.
    nonisolated(unsafe) private static var journal: UnsafeMutablePointer<CChar>?
    nonisolated(unsafe) private static var previous: [(Int32, SignalDisposition.Previous)] = []

    /// `final.partial-<random hex>`.
    static func name(for final: String) -> String {
        final + ".partial-" + RandomID.make(count: 8, alphabet: RandomID.hexDigits)
    }

    /// Removes `partial` if a signal ends the process before `release`.
    static func guardUntilReleased(_ partial: String) {
        path = strdup(partial)
        journal = strdup(partial + "-journal")
        previous = [SIGINT, SIGTERM, SIGHUP].map { signalNumber in
            (
                signalNumber,
                SignalDisposition.replace(signalNumber) { received in
                    if let path = PartialFile.path { unlink(path) }
                    if let journal = PartialFile.journal { unlink(journal) }
                    _exit(128 + received)
                }
            )
        }
    }

    /// Puts back the handlers that were there before `guardUntilReleased`.
    static func release() {
        for (signalNumber, before) in previous { SignalDisposition.restore(signalNumber, before) }
        previous = []
        path = nil  // the copies are not freed: a handler may have been reading them
        journal = nil
    }
}
