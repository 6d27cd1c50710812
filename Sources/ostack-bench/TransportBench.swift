import CurlKit
import Glibc
import FoundationEssentials
import FoundationNetworking
import OStackTestSupport

/// Per-request latency of keep-alive loopback requests: CurlKit vs FoundationNetworking's
/// URLSession against the same local server (decision record 0005).
enum TransportBench {
    static func run(serverScript: String, requests: Int) throws -> [BenchResult] {
        let server = try ChildProcess(executable: "/usr/bin/python3", arguments: [serverScript])
        defer { server.kill() }
        guard let portLine = try server.readLine(timeout: 20), let port = Int(portLine) else {
            throw ChildProcess.TimeoutError()
        }
        let url = "http://127.0.0.1:\(port)/echo"

        let client = HTTPClient()
        for _ in 0..<50 { _ = try client.send(HTTPRequest(url: url)) }  // warm up
        let curlSeconds = try Measure.time {
            for _ in 0..<requests { _ = try client.send(HTTPRequest(url: url)) }
        }

        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        let session = URLSession(configuration: configuration)
        func fetch() {
            let done = DispatchSemaphoreLite()
            session.dataTask(with: URL(string: url)!) { _, _, _ in done.signal() }.resume()
            done.wait()
        }
        for _ in 0..<50 { fetch() }
        let sessionSeconds = Measure.time {
            for _ in 0..<requests { fetch() }
        }
        let curlMs = curlSeconds * 1000 / Double(requests)
        let sessionMs = sessionSeconds * 1000 / Double(requests)
        return [
            BenchResult(
                name: "transport-curlkit", value: curlMs, unit: "ms/request", baseline: sessionMs,
                ratio: curlMs / sessionMs, target: "faster than URLSession", ok: curlMs < sessionMs),
            BenchResult(
                name: "transport-urlsession", value: sessionMs, unit: "ms/request", baseline: nil, ratio: nil,
                target: "informational", ok: true),
        ]
    }
}

/// A counting semaphore without Dispatch's Foundation dependency.
final class DispatchSemaphoreLite: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var count = 0

    init() {
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
    }

    func signal() {
        pthread_mutex_lock(&mutex)
        count += 1
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
    }

    func wait() {
        pthread_mutex_lock(&mutex)
        while count == 0 { pthread_cond_wait(&condition, &mutex) }
        count -= 1
        pthread_mutex_unlock(&mutex)
    }
}
