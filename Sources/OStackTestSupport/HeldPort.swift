import Glibc

/// A loopback port kept bound, without listening, for as long as this object lives: a connection
/// to it is refused, and no other test's server can be given the port meanwhile. Taken right after
/// a test's own server is killed, it keeps "the server cannot be reached" true (a test run beside
/// it could otherwise be given the port and answer).
public final class HeldPort: Sendable {
    public let port: Int
    private let socket: Int32

    /// Nil when the port could not be bound (another process took it first).
    public init?(_ port: Int) {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return nil }
        var reuse: Int32 = 1
        setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            close(socket)
            return nil
        }
        self.port = port
        self.socket = socket
    }

    deinit { close(socket) }
}
