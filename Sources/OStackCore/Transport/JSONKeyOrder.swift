/// The order of an object's members as the document wrote them, which `JSONValue` (a dictionary)
/// does not keep. Used for metadata: the server lists an object's fields in the order its author
/// defined them, and tables show columns in that order (docs/output.md, "Columns").
public enum JSONKeyOrder {
    /// The member names, in document order, of the first object found under a member named `key`
    /// (at any depth, depth-first in document order); nil when there is none or the text is not
    /// well-formed enough to tell (deeper than 64 levels, unterminated).
    public static func members(of key: String, in bytes: [UInt8]) -> [String]? {
        var scanner = Scanner(bytes: bytes, target: Array(key.utf8))
        guard scanner.value(depth: 0) else { return nil }
        return scanner.found
    }

    private struct Scanner {
        let bytes: [UInt8]
        let target: [UInt8]
        var index = 0
        var found: [String]?

        init(bytes: [UInt8], target: [UInt8]) {
            self.bytes = bytes
            self.target = target
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        /// Skips a string starting at `index` (at its opening quote); returns its raw bytes, quotes included.
        mutating func string() -> ArraySlice<UInt8>? {
            let start = index
            index += 1
            while index < bytes.count {
                switch bytes[index] {
                case 0x5C: index += 2
                case 0x22:
                    index += 1
                    return bytes[start..<index]
                default: index += 1
                }
            }
            return nil
        }

        /// Skips one value, recording the members of the first object under the target key.
        mutating func value(depth: Int, collect: Bool = false) -> Bool {
            guard depth < 64 else { return false }
            skipSpace()
            guard index < bytes.count else { return false }
            switch bytes[index] {
            case 0x7B: return object(depth: depth, collect: collect)
            case 0x5B:
                index += 1
                skipSpace()
                if index < bytes.count, bytes[index] == 0x5D {
                    index += 1
                    return true
                }
                while true {
                    guard value(depth: depth + 1) else { return false }
                    skipSpace()
                    guard index < bytes.count else { return false }
                    index += 1
                    if bytes[index - 1] == 0x5D { return true }
                    guard bytes[index - 1] == 0x2C else { return false }
                }
            case 0x22: return string() != nil
            default:
                while index < bytes.count, ![0x2C, 0x7D, 0x5D, 0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) {
                    index += 1
                }
                return true
            }
        }

        mutating func object(depth: Int, collect: Bool) -> Bool {
            index += 1
            var names: [String] = []
            skipSpace()
            if index < bytes.count, bytes[index] == 0x7D {
                index += 1
                if collect { found = names }
                return true
            }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == 0x22, let raw = string() else { return false }
                let isTarget = found == nil && raw.dropFirst().dropLast().elementsEqual(target)
                if collect, case .string(let name)? = JSONValue.parse([0x5B] + raw + [0x5D])?.arrayValue?.first {
                    names.append(name)
                }
                skipSpace()
                guard index < bytes.count, bytes[index] == 0x3A else { return false }
                index += 1
                skipSpace()
                let collectNext = isTarget && index < bytes.count && bytes[index] == 0x7B
                guard value(depth: depth + 1, collect: collectNext) else { return false }
                skipSpace()
                guard index < bytes.count else { return false }
                index += 1
                if bytes[index - 1] == 0x7D {
                    if collect { found = names }
                    return true
                }
                guard bytes[index - 1] == 0x2C else { return false }
            }
        }
    }
}
