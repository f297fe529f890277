"""schemathesis hooks of fuzz_e2e.py (loaded through its config's `hooks`): valid bodies are steered to reach
the routes' real work instead of stopping at a 404 or the fuzz server's --max-tokens 8.

Only values the document already calls valid are changed, into other valid values, so that a request
generated as invalid stays invalid: a non-empty string "model" becomes the served model, and a max_tokens
or max_completion_tokens in the documented range but above 8 becomes 8."""
import schemathesis

MODEL = "smollm2"
MAX_TOKENS = 8


@schemathesis.hook
def map_body(ctx, body):
    if not isinstance(body, dict):
        return body
    if isinstance(body.get("model"), str) and body["model"]:
        body["model"] = MODEL
    for key in ("max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and MAX_TOKENS < v <= 4096:
            body[key] = MAX_TOKENS
    return body
