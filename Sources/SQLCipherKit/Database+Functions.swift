internal import CSQLCipher

extension Database {
    /// A Swift scalar function callable from SQL (`sqlite3_create_function_v2`), e.g. for
    /// evaluating ostack's filter AST on the local mirror. A thrown error becomes an SQL error.
    public func registerFunction(
        _ name: String, argumentCount: Int, deterministic: Bool = true,
        _ body: @escaping ([SQLValue]) throws -> SQLValue
    ) throws(SQLiteError) {
        let box = Unmanaged.passRetained(FunctionBox(body)).toOpaque()
        let flags = SQLITE_UTF8 | (deterministic ? SQLITE_DETERMINISTIC : 0)
        let rc = sqlite3_create_function_v2(
            handle, name, Int32(argumentCount), flags, box,
            { context, count, arguments in
                let box = Unmanaged<FunctionBox>.fromOpaque(sqlite3_user_data(context)!).takeUnretainedValue()
                var values: [SQLValue] = []
                for index in 0..<Int(count) {
                    let argument = arguments![index]
                    switch sqlite3_value_type(argument) {
                    case SQLITE_INTEGER: values.append(.integer(sqlite3_value_int64(argument)))
                    case SQLITE_FLOAT: values.append(.real(sqlite3_value_double(argument)))
                    case SQLITE_TEXT:
                        let length = Int(sqlite3_value_bytes(argument))
                        let text = sqlite3_value_text(argument)
                        values.append(
                            .text(
                                text.map {
                                    String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
                                } ?? ""))
                    case SQLITE_BLOB:
                        let length = Int(sqlite3_value_bytes(argument))
                        let blob = sqlite3_value_blob(argument)
                        values.append(.blob(blob.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []))
                    default: values.append(.null)
                    }
                }
                do {
                    setFunctionResult(context, try box.body(values))
                } catch {
                    sqlite3_result_error(context, "function failed", -1)
                }
            }, nil, nil,
            { pointer in
                if let pointer { Unmanaged<FunctionBox>.fromOpaque(pointer).release() }
            })
        try check(rc, "create_function")
    }
}

final class FunctionBox {
    let body: ([SQLValue]) throws -> SQLValue
    init(_ body: @escaping ([SQLValue]) throws -> SQLValue) { self.body = body }
}

/// The arguments of a raw SQL function call, read without copying (valid only during the call).
public struct SQLFunctionArguments: ~Copyable {
    let count: Int32
    let values: UnsafeMutablePointer<OpaquePointer?>

    public var argumentCount: Int { Int(count) }

    /// The UTF-8 bytes of a TEXT (or BLOB) argument; empty for NULL.
    public func withBytes<R>(at index: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let value = values[index]
        let pointer = sqlite3_value_blob(value)  // first the pointer, then its length (SQLite's rule)
        let length = Int(sqlite3_value_bytes(value))
        guard length > 0, let pointer else {
            return body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return body(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    public func isNull(at index: Int) -> Bool { sqlite3_value_type(values[index]) == SQLITE_NULL }

    public func text(at index: Int) -> String {
        withBytes(at: index) { String(decoding: $0, as: UTF8.self) }
    }
}

extension Database {
    /// A scalar function that reads its arguments in place (no per-call copies): for hot paths such
    /// as extracting a field from every row's JSON during a scan.
    public func registerRawFunction(
        _ name: String, argumentCount: Int, deterministic: Bool,
        _ body: @escaping (borrowing SQLFunctionArguments) -> SQLValue
    ) throws(SQLiteError) {
        let box = Unmanaged.passRetained(RawFunctionBox(body)).toOpaque()
        let flags = SQLITE_UTF8 | (deterministic ? SQLITE_DETERMINISTIC : 0)
        let rc = sqlite3_create_function_v2(
            handle, name, Int32(argumentCount), flags, box,
            { context, count, arguments in
                let box = Unmanaged<RawFunctionBox>.fromOpaque(sqlite3_user_data(context)!).takeUnretainedValue()
                setFunctionResult(context, box.body(SQLFunctionArguments(count: count, values: arguments!)))
            }, nil, nil,
            { pointer in
                if let pointer { Unmanaged<RawFunctionBox>.fromOpaque(pointer).release() }
            })
        try check(rc, "create_function")
    }
}

final class RawFunctionBox {
    let body: (borrowing SQLFunctionArguments) -> SQLValue
    init(_ body: @escaping (borrowing SQLFunctionArguments) -> SQLValue) { self.body = body }
}

/// Hands a Swift function's result to SQLite (text and blobs are copied by SQLite).
func setFunctionResult(_ context: OpaquePointer?, _ result: SQLValue) {
    switch result {
    case .null: sqlite3_result_null(context)
    case .integer(let value): sqlite3_result_int64(context, value)
    case .real(let value): sqlite3_result_double(context, value)
    case .text(let value):
        // With its byte length: text holding NUL is not cut short.
        let bytes = Array(value.utf8)
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                if let base = chars.baseAddress {
                    sqlite3_result_text(context, base, Int32(chars.count), csqlcipher_transient())
                } else {
                    sqlite3_result_text(context, "", 0, csqlcipher_transient())
                }
            }
        }
    case .blob(let value):
        value.withUnsafeBytes { raw in
            sqlite3_result_blob(context, raw.baseAddress, Int32(raw.count), csqlcipher_transient())
        }
    }
}
