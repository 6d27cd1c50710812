import DevServerCore
import NIOCore
import NIOHTTP1
import NIOPosix

/// The NIO HTTP/1.1 server in front of `DevServerApp`: keep-alive, bounded request bodies, and the
/// ability to close a connection without answering (fault injection).
public final class DevServer: Sendable {
    public enum StartError: Error, CustomStringConvertible {
        case notLoopback(String)
        public var description: String {
            switch self {
            case .notLoopback(let host): "refusing to listen on \(host): ostack-devserver binds 127.0.0.1 only"
            }
        }
    }

    let app: DevServerApp
    let group: MultiThreadedEventLoopGroup
    let channel: any Channel
    /// The port actually bound (useful with port 0).
    public let port: Int

    public static func start(_ configuration: DevServerConfiguration) async throws -> DevServer {
        guard DevServerConfiguration.isLoopback(configuration.host) else {
            throw StartError.notLoopback(configuration.host)
        }
        let app = DevServerApp(configuration: configuration)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(RequestHandler(app: app))
                }
            }
        let host = configuration.host == "localhost" ? "127.0.0.1" : configuration.host
        let channel = try await bootstrap.bind(host: host, port: configuration.port).get()
        return DevServer(
            app: app, group: group, channel: channel, port: channel.localAddress?.port ?? configuration.port)
    }

    init(app: DevServerApp, group: MultiThreadedEventLoopGroup, channel: any Channel, port: Int) {
        self.app = app
        self.group = group
        self.channel = channel
        self.port = port
    }

    /// Runs until the server channel closes (never, for the executable: it is stopped with a signal).
    public func wait() async throws {
        try await channel.closeFuture.get()
    }

    public func stop() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }
}

/// Collects one request (head + body ≤ 32 MiB), asks the app, writes or drops.
final class RequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let maxBody = 32 << 20
    /// Node's default `--max-http-header-size` (16 KiB: the request line and every header), which
    /// the real server (Hono on Node's http) answers with a bodiless 431; a long filter in a URL
    /// meets it there. (Behind nginx, 8 KiB of request line is a 414.)
    static let maxHead = 16 << 10
    let app: DevServerApp
    var head: HTTPRequestHead?
    var body: [UInt8] = []
    var tooLarge = false

    init(app: DevServerApp) {
        self.app = app
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            tooLarge = false
        case .body(var buffer):
            if body.count + buffer.readableBytes > Self.maxBody {
                tooLarge = true
            } else if let bytes = buffer.readBytes(length: buffer.readableBytes) {
                body.append(contentsOf: bytes)
            }
        case .end:
            guard let head else { return }
            self.head = nil
            if tooLarge {
                write(
                    context: context, head: head,
                    response: .error(status: 413, code: "PAYLOAD_TOO_LARGE", message: "Body too large"))
                return
            }
            let headBytes =
                head.method.rawValue.utf8.count + head.uri.utf8.count + 12
                + head.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
            if headBytes > Self.maxHead {
                var response = CoreResponse(status: 431, headers: [("Connection", "close")], body: nil)
                response.rawBody = []
                write(context: context, head: head, response: response)
                return
            }
            let request = Self.makeRequest(head, body: body)
            let (action, delay) = app.handle(request)
            let respond = { [self] in
                switch action {
                case .respond(let response): self.write(context: context, head: head, response: response)
                case .drop: context.close(promise: nil)
                }
            }
            if delay > 0 {
                context.eventLoop.scheduleTask(in: .milliseconds(Int64(delay))) { respond() }
            } else {
                respond()
            }
        }
    }

    func write(context: ChannelHandlerContext, head: HTTPRequestHead, response: CoreResponse) {
        let bytes = response.rawBody ?? response.body?.serialized() ?? []
        var headers = HTTPHeaders()
        if response.body != nil && response.rawBody == nil {
            headers.add(name: "Content-Type", value: "application/json")
        }
        headers.add(name: "Content-Length", value: String(bytes.count))
        headers.add(name: "Date", value: Self.httpDate())
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        // A response saying `Connection: close` (the 431 of an oversized head, as Node) closes it.
        let keepAlive = head.isKeepAlive && !response.headers.contains { $0.0 == "Connection" && $0.1 == "close" }
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        let responseHead = HTTPResponseHead(
            version: head.version, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        if !bytes.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: bytes.count)
            buffer.writeBytes(bytes)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        let done = context.writeAndFlushPromise()
        context.write(wrapOutboundOut(.end(nil)), promise: done)
        if !keepAlive {
            done.futureResult.whenComplete { _ in context.close(promise: nil) }
        }
    }

    static func makeRequest(_ head: HTTPRequestHead, body: [UInt8]) -> AppRequest {
        let uri = head.uri
        let pathPart = uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
        let queryPart = uri.contains("?") ? String(uri[uri.index(after: uri.firstIndex(of: "?")!)...]) : ""
        let query: [(String, String)] = queryPart.split(separator: "&").compactMap { pair in
            let pieces = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard let name = pieces.first.map(percentDecode), !name.isEmpty else { return nil }
            return (name, pieces.count > 1 ? percentDecode(pieces[1]) : "")
        }
        return AppRequest(
            method: head.method.rawValue, path: percentDecode(pathPart), query: query,
            headers: head.headers.map { ($0.name, $0.value) }, body: body)
    }

    static func percentDecode(_ text: String) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), iterator.count >= 2,
                let value = UInt8(String(decoding: iterator.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                iterator = iterator.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension ChannelHandlerContext {
    func writeAndFlushPromise() -> EventLoopPromise<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        promise.futureResult.whenComplete { _ in }
        flushAfterWrite(promise)
        return promise
    }

    private func flushAfterWrite(_ promise: EventLoopPromise<Void>) {
        eventLoop.execute { self.flush() }
    }
}

extension RequestHandler {
    /// RFC 9110 IMF-fixdate of now, e.g. "Sun, 06 Nov 1994 08:49:37 GMT" (clients check clock skew).
    static func httpDate() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : String(value) }
        return
            "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
