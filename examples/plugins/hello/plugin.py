"""hello: the smallest useful caplet plugin (no capabilities at all)."""


def create_functions(config):
    greeting = config["greeting"]

    def say(name):
        if not isinstance(name, str) or not name or len(name) > 200:
            raise ValueError("name must be a non-empty string of at most 200 characters")
        return f"{greeting}, {name}!"

    def shout(name):
        return say(name).upper()

    return {"greet": {"say": say, "shout": shout}}
