from loadtests.sse import EventParser


def feed_all(lines):
    p, out = EventParser(), []
    for line in lines:
        data = p.feed(line)
        if data is not None:
            out.append(data)
    tail = p.flush()
    return out + ([tail] if tail is not None else [])


def test_events_end_at_blank_lines():
    assert feed_all([b'data: {"a":1}\n', b"\n", b"data: [DONE]\n", b"\n"]) == ['{"a":1}', "[DONE]"]


def test_crlf_comments_and_other_fields_are_handled():
    lines = [b": keep-alive\r\n", b"event: message\r\n", b"id: 7\r\n", b"data: x\r\n", b"\r\n"]
    assert feed_all(lines) == ["x"]


def test_multiline_data_is_joined_with_newlines():
    assert feed_all([b"data: one\n", b"data:two\n", b"\n"]) == ["one\ntwo"]


def test_an_unterminated_last_event_is_flushed():
    assert feed_all([b"data: last"]) == ["last"]


def test_utf8_text_survives():
    assert feed_all(["data: héllo ☃\n".encode(), b"\n"]) == ["héllo ☃"]
