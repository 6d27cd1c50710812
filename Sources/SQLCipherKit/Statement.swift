internal import CSQLCipher
import SodiumKit

/// A prepared statement. Reuse it with `reset()` + `bind(…)` for bulk work; it is finalized when
/// released. Error values from it never contain the bound values.
public final class Statement {
    let handle: OpaquePointer
    unowned let database: Database
    public let sql: String

    init(database: Database, sql: String) throws(SQLiteError) {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(database.handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw database.makeError(rc == SQLITE_OK ? SQLITE_MISUSE : rc, "prepare")
        }
        self.handle = statement
        self.database = database
        self.sql = sql
    }

    deinit {
        sqlite3_finalize(handle)
    }

    /// Binds values to `?1 … ?n`, after clearing earlier bindings and resetting.
    public func bind(_ values: [SQLValue]) throws(SQLiteError) {
        reset()
        for (index, value) in values.enumerated() { try bind(value, at: Int32(index + 1)) }
    }

    /// Binds values by parameter name (`:name`, `@name` or `$name`).
    public func bind(named values: [String: SQLValue]) throws(SQLiteError) {
        reset()
        for (name, value) in values {
            let index = sqlite3_bind_parameter_index(handle, name)
            guard index > 0 else {
                throw SQLiteError(
                    kind: .other, code: SQLITE_RANGE, extendedCode: SQLITE_RANGE, operation: "bind",
                    message: "no parameter named \(name)")
            }
            try bind(value, at: index)
        }
    }

    /// Binds one value at a 1-based index.
    public func bind(_ value: SQLValue, at index: Int32) throws(SQLiteError) {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(handle, index)
        case .integer(let number): rc = sqlite3_bind_int64(handle, index, number)
        case .real(let number): rc = sqlite3_bind_double(handle, index, number)
        case .text(let text): rc = textCode(text, at: index)
        case .blob(let bytes):
            rc = bytes.withUnsafeBytes { raw in
                sqlite3_bind_blob(
                    handle, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(raw.count),
                    csqlcipher_transient())
            }
        }
        try database.check(rc, "bind")
    }

    private func textCode(_ text: String, at index: Int32) -> Int32 {
        // Explicit byte length: text may contain NUL characters. SQLite copies it.
        var text = text
        return text.withUTF8 { utf8 in
            sqlite3_bind_text(
                handle, index,
                UnsafeRawPointer(utf8.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                    .assumingMemoryBound(to: CChar.self), Int32(utf8.count), csqlcipher_transient())
        }
    }

    // Unchecked binds for bulk writes: no array of values, no `String` of bytes already in hand. The
    // first failure (a bad index, out of memory) is kept and thrown by `checkBindings()`.

    public func bindText(_ text: String, at index: Int32) { note(textCode(text, at: index)) }

    /// Binds bytes the caller has checked to be UTF-8 as text (SQLite copies them).
    public func bindText(utf8 bytes: UnsafeRawBufferPointer, at index: Int32) {
        note(
            sqlite3_bind_text(
                handle, index,
                (bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!).assumingMemoryBound(to: CChar.self),
                Int32(bytes.count), csqlcipher_transient()))
    }

    /// Binds bytes as a BLOB (SQLite copies them).
    public func bindBlob(_ bytes: UnsafeRawBufferPointer, at index: Int32) {
        note(
            sqlite3_bind_blob(
                handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count),
                csqlcipher_transient()))
    }

    public func bindInteger(_ value: Int64, at index: Int32) { note(sqlite3_bind_int64(handle, index, value)) }

    public func bindNull(at index: Int32) { note(sqlite3_bind_null(handle, index)) }

    private var bindFailure: Int32 = 0

    private func note(_ code: Int32) {
        if code != 0 && bindFailure == 0 { bindFailure = code }
    }

    /// Throws the first failure of the unchecked binds since the last call.
    public func checkBindings() throws(SQLiteError) {
        let code = bindFailure
        bindFailure = 0
        try database.check(code, "bind")
    }

    /// Binds secret bytes as text without them ever becoming a Swift `String` (SQLite copies them).
    public func bindSecretText(_ secret: SecretBytes, at index: Int32) throws(SQLiteError) {
        let rc = secret.withUnsafeBytes { raw in
            sqlite3_bind_text(
                handle, index, raw.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(raw.count),
                csqlcipher_transient())
        }
        try database.check(rc, "bind")
    }

    /// Advances to the next row: true when a row is available, false when done.
    @discardableResult
    public func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(handle)
        if rc == SQLITE_ROW { return true }
        // Done or failed: a step after this one starts the statement again (SQLite resets it itself).
        names = nil
        if rc == SQLITE_DONE { return false }
        throw database.makeError(rc, "step")
    }

    /// Resets for another execution and clears bindings.
    public func reset() {
        names = nil
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    public var columnCount: Int { Int(sqlite3_column_count(handle)) }

    public func columnName(_ index: Int) -> String { String(cString: sqlite3_column_name(handle, Int32(index))) }

    /// The value of a column in the current row.
    public func value(at index: Int) -> SQLValue {
        let column = Int32(index)
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, column))
        case SQLITE_TEXT:
            let count = Int(sqlite3_column_bytes(handle, column))
            guard let text = sqlite3_column_text(handle, column) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, column))
            guard count > 0, let blob = sqlite3_column_blob(handle, column) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: blob, count: count)))
        default: return .null
        }
    }

    /// The bytes of a TEXT or BLOB column of the current row, without copying (valid in `body` only).
    public func withColumnBytes<R, E: Error>(at index: Int, _ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E)
        -> R
    {
        let column = Int32(index)
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return try body(UnsafeRawBufferPointer(start: count > 0 ? pointer : nil, count: count))
    }

    /// Whether a column of the current row is NULL.
    public func isNull(at index: Int) -> Bool { sqlite3_column_type(handle, Int32(index)) == SQLITE_NULL }

    /// The integer in a column of the current row (0 for NULL).
    public func integer(at index: Int) -> Int64 { sqlite3_column_int64(handle, Int32(index)) }

    /// The column names of the current result, made once per execution and shared by its rows (a
    /// statement prepared again after a schema change may name other columns: cleared by `reset` and
    /// when a step ends the execution).
    private var names: [String]?

    /// The current row as a value.
    public func row() -> Row {
        let count = columnCount
        let columns = names.flatMap { $0.count == count ? $0 : nil } ?? (0..<count).map(columnName)
        names = columns
        return Row(columns: columns, values: (0..<count).map(value(at:)))
    }
}

/// One result row: column names and values.
public struct Row: Sendable, Equatable {
    public var columns: [String]
    public var values: [SQLValue]

    public subscript(index: Int) -> SQLValue { values[index] }

    public subscript(column: String) -> SQLValue {
        guard let index = columns.firstIndex(of: column) else { return .null }
        return values[index]
    }

    public func int(_ column: String) -> Int64? {
        if case .integer(let value) = self[column] { return value }
        return nil
    }

    public func text(_ column: String) -> String? {
        if case .text(let value) = self[column] { return value }
        return nil
    }

    public func double(_ column: String) -> Double? {
        switch self[column] {
        case .real(let value): return value
        case .integer(let value): return Double(value)
        default: return nil
        }
    }

    public func blob(_ column: String) -> [UInt8]? {
        if case .blob(let value) = self[column] { return value }
        return nil
    }
}
