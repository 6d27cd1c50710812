import Dispatch
import Testing

@testable import OStackCore

@Suite struct HandOffTests {
    /// `hasWaiting` says whether `next()` would return at once: an item queued, or the end.
    @Test func hasWaitingSaysWhetherNextWouldWait() throws {
        let handOff = HandOff<Int>(depth: 2)
        let produced = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        handOff.run {
            for item in 1...2 {
                guard handOff.reserve() else { return }
                proceed.wait()
                handOff.put(item)
                produced.signal()
            }
            proceed.wait()
            handOff.close()
            produced.signal()
        }
        defer { handOff.stop() }
        #expect(!handOff.hasWaiting)
        proceed.signal()
        produced.wait()
        #expect(handOff.hasWaiting)
        #expect(try handOff.next() == 1)
        handOff.release()
        #expect(!handOff.hasWaiting)
        proceed.signal()
        produced.wait()
        #expect(handOff.hasWaiting)
        #expect(try handOff.next() == 2)
        handOff.release()
        #expect(!handOff.hasWaiting)
        proceed.signal()
        produced.wait()
        #expect(handOff.hasWaiting)
        #expect(try handOff.next() == nil)
        #expect(handOff.hasWaiting)
    }
}
