internal import CPlatform
import Glibc

/// A Unix stream socket with length-prefixed frames, for the agent and its clients.
public final class UnixSocket: @unchecked Sendable {
    // @unchecked Sendable: one owner at a time; the descriptor is closed once in deinit.
    public let fd: Int32

    init(fd: Int32) {
        self.fd = fd
    }

    deinit { close(fd) }

    /// Listens at `path` (mode 0600; an old socket file is replaced). The directory must be 0700.
    public static func listen(path: String) throws(PlatformError) -> UnixSocket {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw PlatformError(.open, errno: errno, path: path) }
        let socket = UnixSocket(fd: fd)
        unlink(path)
        let previous = umask(0o177)
        defer { umask(previous) }
        try withAddress(path) { (address, length) throws(PlatformError) in
            if bind(fd, address, length) != 0 { throw PlatformError(.open, errno: errno, path: path) }
        }
        chmod(path, 0o600)
        // Room for many clients at once: a client whose connect finds the backlog full waits (up to
        // its bound) and then takes the listener for one that accepts nothing.
        guard Glibc.listen(fd, 128) == 0 else { throw PlatformError(.open, errno: errno, path: path) }
        return socket
    }

    /// Connects to the socket at `path`. A listener that accepts nothing (stopped, hung) makes
    /// `connect` wait once its backlog is full — forever, unless `timeout` (seconds) bounds the wait:
    /// then it fails with `EAGAIN`.
    public static func connect(path: String, timeout: Double? = nil) throws(PlatformError) -> UnixSocket {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw PlatformError(.open, errno: errno, path: path) }
        let socket = UnixSocket(fd: fd)
        if let timeout {
            // A Unix socket's connect waits for room in the backlog for as long as its send timeout.
            var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
            guard setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size)) == 0 else {
                throw PlatformError(.open, errno: errno, path: path)
            }
        }
        try withAddress(path) { (address, length) throws(PlatformError) in
            if Glibc.connect(fd, address, length) != 0 { throw PlatformError(.open, errno: errno, path: path) }
        }
        return socket
    }

    /// Waits up to `timeout` seconds for a connection; nil on timeout.
    public func accept(timeout: Double) -> UnixSocket? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(max(0, timeout) * 1000)) > 0 else { return nil }
        let client = Glibc.accept(fd, nil, nil)
        guard client >= 0 else { return nil }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        return UnixSocket(fd: client)
    }

    /// The uid of the connected peer (SO_PEERCRED), or nil.
    public var peerUID: UInt32? {
        let uid = cplatform_peer_uid(fd)
        return uid >= 0 ? UInt32(uid) : nil
    }

    /// The pid of the connected peer (SO_PEERCRED: the process that listened), or nil.
    public var peerPID: Int32? {
        let pid = cplatform_peer_pid(fd)
        return pid > 0 ? Int32(pid) : nil
    }

    /// Sends one frame: a 4-byte big-endian length and the payload.
    public func send(_ payload: [UInt8]) throws(PlatformError) {
        let length = UInt32(payload.count)
        let frame =
            [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + payload
        var offset = 0
        while offset < frame.count {
            let n = frame.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw PlatformError(.write, errno: errno, path: "socket")
            }
            offset += n
        }
    }

    /// Sends one frame straight from `payload` (e.g. secret memory): only the 4-byte length is
    /// written from elsewhere, the payload is never copied.
    public func send(frame payload: UnsafeRawBufferPointer) throws(PlatformError) {
        let length = UInt32(payload.count)
        let header = [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
        try Self.rethrowing(
            header.withUnsafeBytes { bytes in Self.capture { () throws(PlatformError) in try write(bytes) } })
        try write(payload)
    }

    private func write(_ bytes: UnsafeRawBufferPointer) throws(PlatformError) {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if n < 0 {
                if errno == EINTR { continue }
                throw PlatformError(.write, errno: errno, path: "socket")
            }
            offset += n
        }
    }

    /// Receives one frame (at most `limit` bytes), waiting at most `timeout` seconds.
    public func receive(limit: Int = 1 << 20, timeout: Double = 5) throws(PlatformError) -> [UInt8] {
        let length = try receiveLength(limit: limit, timeout: timeout)
        var buffer = [UInt8](repeating: 0, count: length)
        try Self.rethrowing(
            buffer.withUnsafeMutableBytes { bytes in
                Self.capture { () throws(PlatformError) in try receive(into: bytes, timeout: timeout) }
            })
        return buffer
    }

    /// Receives the length prefix of the next frame (at most `limit`). The caller then reads the
    /// payload with `receive(into:timeout:)` into memory of its choice (e.g. secret memory).
    public func receiveLength(limit: Int = 1 << 20, timeout: Double = 5) throws(PlatformError) -> Int {
        var header: [UInt8] = [0, 0, 0, 0]
        try Self.rethrowing(
            header.withUnsafeMutableBytes { bytes in
                Self.capture { () throws(PlatformError) in try receive(into: bytes, timeout: timeout) }
            })
        let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard length <= limit else { throw PlatformError(.read, errno: EMSGSIZE, path: "socket") }
        return length
    }

    /// Fills `buffer` with the next `buffer.count` bytes, waiting at most `timeout` seconds for each
    /// read. The bytes go straight into `buffer`: no intermediate copy.
    public func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Double = 5) throws(PlatformError) {
        var offset = 0
        while offset < buffer.count {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(timeout * 1000)) > 0 else {
                throw PlatformError(.read, errno: ETIMEDOUT, path: "socket")
            }
            let n = recv(fd, buffer.baseAddress! + offset, buffer.count - offset, 0)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw PlatformError(.read, errno: n == 0 ? ECONNRESET : errno, path: "socket") }
            offset += n
        }
    }

    /// The error of `body`, if any (the standard library's `withUnsafe…` closures cannot throw a typed error).
    private static func capture(_ body: () throws(PlatformError) -> Void) -> PlatformError? {
        do {
            try body()
            return nil
        } catch {
            return error
        }
    }

    private static func rethrowing(_ error: PlatformError?) throws(PlatformError) {
        if let error { throw error }
    }

    private static func withAddress(
        _ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) throws(PlatformError) -> Void
    ) throws(PlatformError) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { throw PlatformError(.open, errno: ENAMETOOLONG, path: path) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        var copy = address
        try withUnsafePointer(to: &copy) { pointer throws(PlatformError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (address) throws(PlatformError) in
                try body(address, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }
}
