"""A server's unwanted answer in one line: status, phrase, the gist of its body, and what to do about it."""

from ddbench.core.answers import gist, refused

NGINX = """<html>
<head><title>404 Not Found</title></head>
<body>
<center><h1>404 Not Found</h1></center>
<hr><center>nginx/1.24.0</center>
</body>
</html>
"""


def test_an_html_page_is_reduced_to_its_title():
    assert gist(NGINX) == "404 Not Found"
    assert gist("<p>plain <b>words</b></p>") == "plain words"
    assert gist('{"error": "bad"}') == '{"error": "bad"}'
    assert len(gist("x" * 1000)) == 300


def test_a_refusal_names_the_status_and_what_to_do():
    text = refused("http://h:1/v1/models", 401, '{"detail": "Unauthorized"}')
    assert text.startswith("http://h:1/v1/models answered HTTP 401 Unauthorized")
    assert "api_key_env" in text
    assert "403 Forbidden" in refused("u", 403) and "api_key_env" in refused("u", 403)
    page = refused("http://h:1/v1/models", 404, NGINX)
    assert "<" not in page and "without /v1" in page and "(404 Not Found)" in page
    assert refused("u", 599) == "u answered HTTP 599 unknown status"
