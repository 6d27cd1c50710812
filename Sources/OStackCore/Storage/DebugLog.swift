import Glibc
import PlatformKit

/// The local debug log (`$XDG_STATE_HOME/ostack/debug.log`, 0600). Unknown errors are written here
/// under a reference id that the user sees (docs/security.md#err-1). Entries are single lines; every value passes
/// through `redact` so a token-like value, an `Authorization` header or a control character never
/// lands in the file (docs/security.md#err-4, #tok-5).
public struct DebugLog: Sendable {
    public let path: String
    /// The log is truncated when it grows beyond this many bytes.
    public var maxBytes: Int = 1 << 20

    public init(layout: FileLayout) {
        path = layout.debugLogFile
    }

    /// Appends one line: `<UTC time> ref=<id> code=<code> <detail>`.
    public func append(referenceID: String, code: String, detail: String) {
        // The state directory must be ours and private, and the log is never written through a
        // symbolic link (docs/security.md#fs-2): a planted link makes this best-effort log a no-op.
        guard (try? SecureFileSystem.createPrivateDirectory(SecureFileSystem.parentDirectory(of: path))) != nil else {
            return
        }
        var info = stat()
        let truncate = lstat(path, &info) == 0 && Int(info.st_size) > maxBytes
        let flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (truncate ? O_TRUNC : 0)
        let fd = open(path, flags, SecureFileSystem.fileMode)
        guard fd >= 0 else { return }
        defer { close(fd) }
        fchmod(fd, SecureFileSystem.fileMode)
        let line = "\(Self.timestamp()) ref=\(referenceID) code=\(code) \(Self.redact(detail))\n"
        _ = line.withCString { write(fd, $0, strlen($0)) }
    }

    /// Removes control characters and masks values that look like credentials: anything after
    /// `Authorization:`, `Bearer `, `token=`, `password=`, `osk_`, and long opaque strings.
    public static func redact(_ text: String) -> String {
        var cleaned = String(
            String.UnicodeScalarView(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : $0 }))
        for marker in ["authorization:", "bearer ", "token=", "token\":\"", "password=", "x-api-key:"] {
            cleaned = mask(after: marker, in: cleaned)
        }
        return cleaned.split(separator: " ", omittingEmptySubsequences: false).map { word -> String in
            if word.hasPrefix("osk_") { return "osk_<redacted>" }
            if word.count >= 32 && word.allSatisfy({ $0.isLetter || $0.isNumber || "-_.=+/".contains($0) }) {
                return "<redacted>"
            }
            return String(word)
        }.joined(separator: " ")
    }

    private static func mask(after marker: String, in text: String) -> String {
        let characters = Array(text)
        let lowered = characters.map { $0.isASCII ? Character($0.lowercased()) : $0 }
        let needle = Array(marker)
        var result: [Character] = []
        var index = 0
        while index < characters.count {
            if index + needle.count <= characters.count && Array(lowered[index..<index + needle.count]) == needle {
                result.append(contentsOf: characters[index..<index + needle.count])
                result.append(contentsOf: "<redacted>")
                index += needle.count
                while index < characters.count, !characters[index].isWhitespace, characters[index] != "\"",
                    characters[index] != ","
                {
                    index += 1
                }
            } else {
                result.append(characters[index])
                index += 1
            }
        }
        return String(result)
    }

    /// UTC ISO 8601 to the second ("2026-11-23T01:46:44Z").
    static func timestamp() -> String {
        Timestamp.iso8601(secondsSince1970: Double(time(nil)), milliseconds: false)
    }
}
