import SodiumKit

extension AccountSession {
    /// `export-database`: a copy of the account's database for backup, readable with the stock
    /// `sqlcipher` shell (docs/storage.md, "Reading a database with stock tools"): encrypted under a
    /// passphrase of the user's with SQLCipher's default settings, or plain SQLite when `passphrase`
    /// is nil. The copy never overwrites a file, is created with mode 0600, and leaves out the
    /// indexes that call ostack's own SQL functions (stock tools do not have them).
    /// The copy is written to `partial` and given the name `path` only when complete.
    public func exportDatabase(to path: String, partial: String, passphrase: SecretBytes?) throws(OStackError) {
        let functionIndexes = try store.rows(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql LIKE ?", [.text("%ostack\\_%")]
        ).compactMap { $0.text("name") }
        do {
            try store.database.backup(to: path, through: partial, passphrase: passphrase, dropping: functionIndexes)
        } catch  where error.message == "file exists" {
            throw OStackError(
                .invalidInput, context: .init(suggestion: "That file exists, and an export never overwrites a file."),
                detail: "export target exists")
        } catch {
            throw OStackError(.storageFailure, context: .init(account: account.alias), detail: "export: \(error.kind)")
        }
        try audit.append("database.export", details: ["encrypted": passphrase == nil ? "no" : "yes"])
        didChange()
    }
}
