"""The rlinf-eks component package's entry point: the Python language host runs this file with the
engine's address; it serves the components of rlinf_eks.hosted (the package schema is inferred from
their annotations; see provider/schema.json for what it is)."""

from rlinf_eks.hosted.provider import serve

if __name__ == "__main__":
    serve()
