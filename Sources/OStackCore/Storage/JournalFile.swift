import FoundationEssentials
import PlatformKit

/// A small crash-recovery journal kept as a JSON file (0600, written atomically): the login, PIN and
/// keyring-migration journals read, write and clear theirs through this one place.
enum JournalFile {
    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    /// The journal at `path`, nil when there is none; an unreadable one is `unsupported-format`.
    static func read<Journal: Decodable>(_ type: Journal.Type, at path: String, name: String) throws(OStackError)
        -> Journal?
    {
        let bytes: [UInt8]?
        do {
            bytes = try SecureFileSystem.readFile(path)
        } catch {
            throw OStackError(.storageFailure, detail: "reading the \(name): \(error)")
        }
        guard let bytes else { return nil }
        guard let journal = try? decoder().decode(Journal.self, from: Data(bytes)) else {
            throw OStackError(.unsupportedFormat, detail: "the \(name) is not readable")
        }
        return journal
    }

    /// Writes the journal atomically, creating `directory` (0700) first.
    static func write<Journal: Encodable>(_ journal: Journal, to path: String, in directory: String, name: String)
        throws(OStackError)
    {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        do {
            try SecureFileSystem.createDirectory(directory)
            try SecureFileSystem.writeAtomically(Array(encoder.encode(journal)), to: path)
        } catch {
            throw OStackError(.storageFailure, detail: "writing the \(name): \(error)")
        }
    }

    static func clear(_ path: String, name: String) throws(OStackError) {
        do {
            try SecureFileSystem.removeFile(path)
        } catch {
            throw OStackError(.storageFailure, detail: "clearing the \(name): \(error)")
        }
    }
}
