import ArgumentParser
import OStackCore
import SodiumKit

/// `ostack export-database FILE` — a copy of the account's database for backup, readable with the
/// stock `sqlcipher` shell (docs/storage.md, "Reading a database with stock tools").
struct ExportDatabaseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-database",
        abstract: "Write a copy of the account's local database for backup (encrypted under a passphrase).",
        discussion: """
            The copy is encrypted under a passphrase you choose (asked twice on a terminal, or read from stdin \
            with --passphrase-stdin) with SQLCipher's default settings: `sqlcipher FILE` then `PRAGMA key = '…';` \
            opens it. --plaintext writes plain SQLite instead: it holds every record in the clear. \
            The file must not exist; it is created with mode 0600.
            """)

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The file to write (must not exist).") var file: String
    @Flag(name: .customLong("passphrase-stdin"), help: "Read the passphrase from stdin.") var passphraseStdin = false
    @Flag(help: "Write plain, unencrypted SQLite (every record readable by anyone with the file).")
    var plaintext = false

    func validate() throws {
        if plaintext && passphraseStdin { throw ValidationError("Pass --plaintext or --passphrase-stdin, not both.") }
    }

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let session = try context.selectedSession()
            var passphrase: SecretBytes?
            if !plaintext {
                if passphraseStdin {
                    passphrase = try SecretInput.fromStdin()
                } else {
                    let first = try SecretInput.prompt(
                        "Passphrase for the copy: ", noInput: global.noInput, flag: "--passphrase-stdin")
                    let second = try SecretInput.prompt(
                        "Passphrase again: ", noInput: global.noInput, flag: "--passphrase-stdin")
                    guard first == second else {
                        throw OStackError(
                            .invalidInput, context: .init(suggestion: "The passphrases differ; nothing was written."))
                    }
                    passphrase = first
                }
                guard let given = passphrase, given.count >= 8 else {
                    throw OStackError(
                        .invalidInput, context: .init(suggestion: "Use a passphrase of at least 8 characters."))
                }
            }
            let partial = PartialFile.name(for: file)
            PartialFile.guardUntilReleased(partial)
            defer { PartialFile.release() }
            try session.exportDatabase(to: file, partial: partial, passphrase: passphrase)
            struct Document: Encodable {
                var exported: String
                var encrypted: Bool
            }
            context.emit(
                json: Document(exported: file, encrypted: !plaintext),
                human: ErrorPresenter.sanitize(
                    "Wrote \(file) (\(plaintext ? "plain SQLite: every record is readable" : "encrypted")).",
                    maxLength: 400))
        }
    }
}
