/// The order of an object's members as the document wrote them, which `JSONValue` (a dictionary)
/// does not keep. Used for metadata: the server lists an object's fields in the order its author
/// defined them, and tables show columns in that order (docs/output.md, "Columns of records list").
/// Reads with `FieldScanner.Reader`, the byte reader the list and record scanners use.
public enum JSONKeyOrder {
    /// The member names, in document order, of the object at `path` (member names from the top
    /// object down, e.g. `["item", "fields"]`); nil when there is no object there or the text is
    /// not well-formed enough to tell.
    public static func members(at path: [String], in bytes: [UInt8]) -> [String]? {
        bytes.withUnsafeBytes { raw in
            var reader = FieldScanner.Reader(bytes: raw)
            for name in path {
                reader.skipSpace()
                guard enter(&reader, member: name) else { return nil }
            }
            reader.skipSpace()
            return memberNames(&reader)
        }
    }

    /// Moves the reader from the start of an object to the value of its member `name` (the first
    /// one), which must be an object; false when there is none.
    private static func enter(_ reader: inout FieldScanner.Reader, member name: String) -> Bool {
        guard reader.consume(UInt8(ascii: "{")) else { return false }
        reader.skipSpace()
        if reader.consume(UInt8(ascii: "}")) { return false }
        while true {
            reader.skipSpace()
            guard let key = reader.stringRange() else { return false }
            reader.skipSpace()
            guard reader.consume(UInt8(ascii: ":")) else { return false }
            reader.skipSpace()
            if FieldScanner.Reader.decode(reader.bytes, key) == name { return reader.current == UInt8(ascii: "{") }
            guard reader.skipValue() else { return false }
            reader.skipSpace()
            guard reader.consume(UInt8(ascii: ",")) else { return false }
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
