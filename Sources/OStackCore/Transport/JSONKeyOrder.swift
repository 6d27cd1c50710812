/// The order of an object's members as the document wrote them, which `JSONValue` (a dictionary)
/// does not keep. Used for metadata: the server lists an object's fields in the order its author
/// defined them, and tables show columns in that order (docs/output.md, "Columns of records list").
/// Reads with `FieldScanner.Reader`, the byte reader the list and record scanners use.
public enum JSONKeyOrder {
    /// The member names, in document order, of the first object found under a member named `key`
    /// (searching nested objects depth first, in document order); nil when there is none or the
    /// text is not well-formed enough to tell (nested deeper than 64 objects, unterminated).
    public static func members(of key: String, in bytes: [UInt8]) -> [String]? {
        bytes.withUnsafeBytes { raw in
            var reader = FieldScanner.Reader(bytes: raw)
            reader.skipSpace()
            return search(&reader, key: Array(key.utf8), depth: 0)
        }
    }

    /// In the object at the reader, which it moves past: the members of `key`'s object.
    private static func search(_ reader: inout FieldScanner.Reader, key: [UInt8], depth: Int) -> [String]? {
        guard depth < 64, reader.consume(UInt8(ascii: "{")) else { return nil }
        var found: [String]?
        reader.skipSpace()
        if reader.consume(UInt8(ascii: "}")) { return nil }
        while true {
            reader.skipSpace()
            guard let name = reader.stringRange() else { return nil }
            reader.skipSpace()
            guard reader.consume(UInt8(ascii: ":")) else { return nil }
            reader.skipSpace()
            if found == nil, reader.current == UInt8(ascii: "{") {
                let start = reader.index
                if FieldScanner.Reader.decode(reader.bytes, name) == String(decoding: key, as: UTF8.self) {
                    guard let names = memberNames(&reader) else { return nil }
                    found = names
                } else if let nested = search(&reader, key: key, depth: depth + 1) {
                    found = nested
                } else {
                    reader.index = start
                    guard reader.skipValue() else { return nil }
                }
            } else if !reader.skipValue() {
                return nil
            }
            reader.skipSpace()
            if reader.consume(UInt8(ascii: ",")) { continue }
            return reader.consume(UInt8(ascii: "}")) ? found : nil
        }
    }

    /// The member names of the object at the reader, which it moves past.
    private static func memberNames(_ reader: inout FieldScanner.Reader) -> [String]? {
        guard reader.consume(UInt8(ascii: "{")) else { return nil }
        var names: [String] = []
        reader.skipSpace()
        if reader.consume(UInt8(ascii: "}")) { return names }
        while true {
            reader.skipSpace()
            guard let name = reader.stringRange() else { return nil }
            names.append(FieldScanner.Reader.decode(reader.bytes, name))
            reader.skipSpace()
            guard reader.consume(UInt8(ascii: ":")) else { return nil }
            reader.skipSpace()
            guard reader.skipValue() else { return nil }
            reader.skipSpace()
            if reader.consume(UInt8(ascii: ",")) { continue }
            return reader.consume(UInt8(ascii: "}")) ? names : nil
        }
    }
}
