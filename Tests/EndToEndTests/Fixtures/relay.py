"""Byte relay shared by the proxy fixtures."""


def pump(source, sink):
    """Copies source to sink until either side closes, then closes both."""
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.close()
            except OSError:
                pass
