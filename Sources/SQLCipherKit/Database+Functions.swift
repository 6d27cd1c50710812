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
                    switch try box.body(values) {
                    case .null: sqlite3_result_null(context)
                    case .integer(let value): sqlite3_result_int64(context, value)
                    case .real(let value): sqlite3_result_double(context, value)
                    case .text(let value): sqlite3_result_text(context, value, -1, csqlcipher_transient())
                    case .blob(let value):
                        value.withUnsafeBytes { raw in
                            sqlite3_result_blob(context, raw.baseAddress, Int32(raw.count), csqlcipher_transient())
                        }
                    }
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
