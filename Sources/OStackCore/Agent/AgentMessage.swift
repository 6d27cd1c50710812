/// The agent's wire format: one request frame, one response frame (length-prefixed by UnixSocket).
/// Request: op (1 byte), account (u16 length + UTF-8), secret (u32 length + bytes), idle and maximum
/// lifetime in seconds (u32 each). Response: status (1 byte), payload (u32 length + bytes).
enum AgentMessage {
    enum Op: UInt8 {
        case put = 1, get, has, forget, forgetAll, status, stop
    }

    enum Status: UInt8 {
        case ok = 0, notFound = 1, refused = 2
    }

    static func request(_ op: Op, account: String = "", secret: [UInt8] = [], idle: UInt32 = 0, lifetime: UInt32 = 0)
        -> [UInt8]
    {
        let name = Array(account.utf8)
        var out: [UInt8] = [op.rawValue, UInt8(name.count >> 8), UInt8(name.count & 0xFF)] + name
        out += be32(UInt32(secret.count)) + secret + be32(idle) + be32(lifetime)
        return out
    }

    static func response(_ status: Status, _ payload: [UInt8] = []) -> [UInt8] {
        [status.rawValue] + be32(UInt32(payload.count)) + payload
    }

    static func be32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    struct Request {
        var op: Op
        var account: String
        var secret: [UInt8]
        var idle: UInt32
        var lifetime: UInt32
    }

    static func parseRequest(_ bytes: [UInt8]) -> Request? {
        var offset = 0
        func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard offset + count <= bytes.count else { return nil }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }
        func u32() -> UInt32? { take(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } } }
        guard let opByte = take(1)?.first, let op = Op(rawValue: opByte), let lengthBytes = take(2) else { return nil }
        let nameLength = Int(lengthBytes.first!) << 8 | Int(lengthBytes.last!)
        guard let name = take(nameLength), let secretLength = u32(), let secret = take(Int(secretLength)),
            let idle = u32(), let lifetime = u32()
        else { return nil }
        return Request(
            op: op, account: String(decoding: name, as: UTF8.self), secret: Array(secret), idle: idle,
            lifetime: lifetime)
    }

    static func parseResponse(_ bytes: [UInt8]) -> (Status, [UInt8])? {
        guard bytes.count >= 5, let status = Status(rawValue: bytes[0]) else { return nil }
        let length = Int(bytes[1]) << 24 | Int(bytes[2]) << 16 | Int(bytes[3]) << 8 | Int(bytes[4])
        guard bytes.count == 5 + length else { return nil }
        return (status, Array(bytes[5...]))
    }
}
