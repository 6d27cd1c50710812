import PlatformKit
import SodiumKit

/// The agent's wire format: one request frame, one response frame (length-prefixed by UnixSocket).
/// Request: op (1 byte), account (u16 length + UTF-8), secret (u32 length + bytes), idle and maximum
/// lifetime in seconds (u32 each). Response: status (1 byte), payload (u32 length + bytes).
///
/// Frames that can carry a key live only in `SecretBytes`: they are encoded into, sent from,
/// received into and decoded out of secret memory, never an ordinary array (so every copy of a key
/// is wiped when it is released).
enum AgentMessage {
    enum Op: UInt8 {
        case put = 1, get, has, forget, forgetAll, status, stop
        /// `get` without counting as use: the idle timer runs on (`sync --watch`).
        case peek
        /// Shortens every held key's limits to `idle` and `lifetime` (0: that one unchanged), as
        /// `config set` of a shorter timeout asks; a longer one waits for the next unlock.
        case limit
    }

    enum Status: UInt8 {
        case ok = 0, notFound = 1, refused = 2
    }

    /// A request frame, in secret memory: the key goes straight from `secret` into the frame.
    static func request(
        _ op: Op, account: String = "", secret: SecretBytes? = nil, idle: UInt32 = 0, lifetime: UInt32 = 0
    ) -> SecretBytes {
        let name = Array(account.utf8)
        let secretCount = secret?.count ?? 0
        return SecretBytes(count: 1 + 2 + name.count + 4 + secretCount + 4 + 4) { out in
            var writer = FrameWriter(out)
            writer.put([op.rawValue, UInt8(name.count >> 8), UInt8(name.count & 0xFF)])
            writer.put(name)
            writer.put32(UInt32(secretCount))
            secret?.withUnsafeBytes { writer.put($0) }
            writer.put32(idle)
            writer.put32(lifetime)
        }
    }

    /// A response frame, in secret memory: the payload (a key, or the status text) is copied from
    /// secret memory only.
    static func response(_ status: Status, _ payload: SecretBytes? = nil) -> SecretBytes {
        let payloadCount = payload?.count ?? 0
        return SecretBytes(count: 1 + 4 + payloadCount) { out in
            var writer = FrameWriter(out)
            writer.put([status.rawValue])
            writer.put32(UInt32(payloadCount))
            payload?.withUnsafeBytes { writer.put($0) }
        }
    }

    struct Request {
        var op: Op
        var account: String
        /// The key of a `put` (empty otherwise), in its own secret memory.
        var secret: SecretBytes
        var idle: UInt32
        var lifetime: UInt32
    }

    static func parseRequest(_ frame: SecretBytes) -> Request? {
        frame.withUnsafeBytes { bytes -> Request? in
            var reader = FrameReader(bytes)
            guard let opByte = reader.take(1)?.first, let op = Op(rawValue: opByte), let nameLength = reader.u16(),
                let name = reader.take(Int(nameLength)), let secretLength = reader.u32(),
                let secret = reader.take(Int(secretLength)), let idle = reader.u32(), let lifetime = reader.u32()
            else { return nil }
            return Request(
                op: op, account: String(decoding: name, as: UTF8.self), secret: SecretBytes(copying: secret),
                idle: idle, lifetime: lifetime)
        }
    }

    /// The status and the payload (in its own secret memory) of a response frame.
    static func parseResponse(_ frame: SecretBytes) -> (Status, SecretBytes)? {
        frame.withUnsafeBytes { bytes -> (Status, SecretBytes)? in
            var reader = FrameReader(bytes)
            guard let statusByte = reader.take(1)?.first, let status = Status(rawValue: statusByte),
                let length = reader.u32(), let payload = reader.take(Int(length)), reader.isAtEnd
            else { return nil }
            return (status, SecretBytes(copying: payload))
        }
    }

    /// Writes big-endian fields into a frame's (secret) buffer.
    struct FrameWriter {
        let buffer: UnsafeMutableRawBufferPointer
        var offset = 0

        init(_ buffer: UnsafeMutableRawBufferPointer) {
            self.buffer = buffer
        }

        mutating func put(_ bytes: some Collection<UInt8>) {
            for byte in bytes {
                buffer[offset] = byte
                offset += 1
            }
        }

        mutating func put(_ bytes: UnsafeRawBufferPointer) {
            guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
            buffer.baseAddress!.advanced(by: offset).copyMemory(from: source, byteCount: bytes.count)
            offset += bytes.count
        }

        mutating func put32(_ value: UInt32) {
            put([UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)])
        }
    }

    /// Reads big-endian fields from a frame's (secret) buffer; nil past its end.
    struct FrameReader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        init(_ bytes: UnsafeRawBufferPointer) {
            self.bytes = bytes
        }

        var isAtEnd: Bool { offset == bytes.count }

        mutating func take(_ count: Int) -> Slice<UnsafeRawBufferPointer>? {
            guard count <= bytes.count - offset else { return nil }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }

        mutating func u16() -> UInt16? { take(2).map { $0.reduce(0) { $0 << 8 | UInt16($1) } } }
        mutating func u32() -> UInt32? { take(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } } }
    }
}

extension UnixSocket {
    /// Sends one frame straight out of secret memory.
    func send(secret frame: SecretBytes) throws(PlatformError) {
        let failure = frame.withUnsafeBytes { bytes -> PlatformError? in
            do throws(PlatformError) {
                try send(frame: bytes)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Receives one frame (at most `limit` bytes) straight into secret memory.
    func receiveSecret(limit: Int, timeout: Double) throws(PlatformError) -> SecretBytes {
        let frame = SecretBytes(zeroedCount: try receiveLength(limit: limit, timeout: timeout))
        let failure = frame.withUnsafeMutableBytes { buffer -> PlatformError? in
            do throws(PlatformError) {
                try receive(into: buffer, timeout: timeout)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
        return frame
    }
}
