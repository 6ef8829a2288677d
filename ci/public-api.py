#!/usr/bin/env python3
"""Renders the public API of a crate from its rustdoc JSON (nightly `--output-format json`):
one line per public item reachable from the crate root (modules, re-exports followed), with
function signatures, struct fields, enum variants, inherent methods and trait impls. The output
is sorted, so a snapshot diff shows exactly what a change added, removed or altered.

    python3 ci/public-api.py target/doc/memmap_core.json > api/memmap-core.txt
"""
import json
import sys


def main(path):
    doc = json.load(open(path))
    index, paths = doc["index"], doc["paths"]
    crate = index[str(doc["root"])]["name"]
    out = set()

    def item(i):
        return index.get(str(i))

    def name_of(i):
        p = paths.get(str(i))
        return "::".join(p["path"]) if p else f"#{i}"

    def generics(g):
        params = []
        for p in g.get("params", []):
            kind = p["kind"]
            if "lifetime" in kind:
                params.append(p["name"])
            elif "type" in kind:
                bounds = [bound(b) for b in kind["type"].get("bounds", [])]
                params.append(p["name"] + (": " + " + ".join(bounds) if bounds else ""))
            elif "const" in kind:
                params.append(f"const {p['name']}: {ty(kind['const']['type'])}")
        return f"<{', '.join(params)}>" if params else ""

    def bound(b):
        if "trait_bound" in b:
            return path_ty(b["trait_bound"]["trait"])
        if "outlives" in b:
            return b["outlives"]
        return "?"

    def args(a):
        if not a:
            return ""
        if "angle_bracketed" in a:
            parts = []
            for x in a["angle_bracketed"].get("args", []):
                if "type" in x:
                    parts.append(ty(x["type"]))
                elif "lifetime" in x:
                    parts.append(x["lifetime"])
                elif "const" in x:
                    parts.append(x["const"].get("expr", "?"))
            for c in a["angle_bracketed"].get("constraints", []):
                binding = c.get("binding", {})
                if "equality" in binding and "type" in binding["equality"]:
                    parts.append(f"{c['name']} = {ty(binding['equality']['type'])}")
            return f"<{', '.join(parts)}>" if parts else ""
        if "parenthesized" in a:
            p = a["parenthesized"]
            r = f" -> {ty(p['output'])}" if p.get("output") else ""
            return f"({', '.join(ty(t) for t in p['inputs'])}){r}"
        return ""

    def path_ty(p):
        return p.get("path", "?").split("::")[-1] + args(p.get("args"))

    def ty(t):
        if t is None:
            return "()"
        k, v = next(iter(t.items()))
        if k == "resolved_path":
            return path_ty(v)
        if k == "primitive":
            return v
        if k == "generic":
            return v
        if k == "borrowed_ref":
            lt = (v["lifetime"] + " ") if v.get("lifetime") else ""
            return f"&{lt}{'mut ' if v['is_mutable'] else ''}{ty(v['type'])}"
        if k == "raw_pointer":
            return f"*{'mut' if v['is_mutable'] else 'const'} {ty(v['type'])}"
        if k == "slice":
            return f"[{ty(v)}]"
        if k == "array":
            return f"[{ty(v['type'])}; {v['len']}]"
        if k == "tuple":
            return f"({', '.join(ty(x) for x in v)})"
        if k == "impl_trait":
            return "impl " + " + ".join(bound(b) for b in v)
        if k == "dyn_trait":
            return "dyn " + " + ".join(path_ty(x["trait"]) for x in v["traits"])
        if k == "qualified_path":
            return f"<{ty(v['self_type'])}>::{v['name']}"
        if k == "function_pointer":
            return "fn(" + ", ".join(ty(x[1]) for x in v["sig"]["inputs"]) + ")"
        return k

    def fn_sig(name, f):
        sig = f["sig"]
        ins = ", ".join(n if n == "self" else f"{n}: {ty(t)}" for n, t in sig["inputs"])
        out_ty = f" -> {ty(sig['output'])}" if sig.get("output") else ""
        h = f["header"]
        quals = ("const " if h.get("is_const") else "") + ("unsafe " if h.get("is_unsafe") else "")
        return f"{quals}fn {name}{generics(f['generics'])}({ins}){out_ty}"

    def impls(prefix, ids):
        for i in ids:
            imp = item(i)
            if not imp:
                continue
            v = imp["inner"]["impl"]
            if v.get("is_synthetic") or v.get("blanket_impl"):
                continue
            if v.get("trait"):
                out.add(f"impl {path_ty(v['trait'])} for {prefix}")
                continue
            for m in v["items"]:
                it = item(m)
                if not it or it["visibility"] != "public":
                    continue
                k, body = next(iter(it["inner"].items()))
                if k == "function":
                    out.add(f"pub {fn_sig(prefix + '::' + it['name'], body)}")
                elif k == "assoc_const":
                    out.add(f"pub const {prefix}::{it['name']}: {ty(body['type'])}")

    def attrs(it):
        a = " ".join(x for x in map(str, it.get("attrs", [])) if "non_exhaustive" in x)
        return "#[non_exhaustive] " if a else ""

    def visit(i, prefix, seen):
        it = item(i)
        if it is None or i in seen:
            return
        seen = seen | {i}
        k, v = next(iter(it["inner"].items()))
        if k == "module":
            for c in v["items"]:
                child = item(c)
                if child is None or child["visibility"] != "public":
                    continue
                ck, cv = next(iter(child["inner"].items()))
                if ck == "use":
                    target = item(cv["id"]) if cv.get("id") is not None else None
                    if cv["is_glob"]:
                        if target:
                            visit(cv["id"], prefix, seen)
                        else:
                            out.add(f"pub use {cv['source']}::*")
                    elif target:
                        visit_named(cv["id"], f"{prefix}::{cv['name']}", seen)
                    else:
                        out.add(f"pub use {cv['source']} as {prefix}::{cv['name']}")
                else:
                    visit_named(c, f"{prefix}::{child['name']}", seen)
            return

    def visit_named(i, path, seen):
        it = item(i)
        if it is None:
            return
        k, v = next(iter(it["inner"].items()))
        if k == "module":
            out.add(f"pub mod {path}")
            visit(i, path, seen)
        elif k == "struct":
            out.add(f"pub {attrs(it)}struct {path}{generics(v['generics'])}")
            kind = v["kind"]
            fields = kind.get("plain", {}).get("fields", []) if isinstance(kind, dict) else []
            if isinstance(kind, dict) and "tuple" in kind:
                fields = [f for f in kind["tuple"] if f is not None]
            for f in fields:
                fi = item(f)
                if fi and fi["visibility"] == "public":
                    out.add(f"pub field {path}.{fi['name']}: {ty(fi['inner']['struct_field'])}")
            impls(path, v["impls"])
        elif k == "enum":
            out.add(f"pub {attrs(it)}enum {path}{generics(v['generics'])}")
            for var in v["variants"]:
                vi = item(var)
                if vi:
                    out.add(f"pub variant {path}::{vi['name']}")
            impls(path, v["impls"])
        elif k == "union":
            out.add(f"pub union {path}")
            impls(path, v["impls"])
        elif k == "trait":
            unsafe = "unsafe " if v.get("is_unsafe") else ""
            out.add(f"pub {unsafe}trait {path}{generics(v['generics'])}")
            for m in v["items"]:
                mi = item(m)
                if mi and "function" in mi["inner"]:
                    out.add(f"trait {fn_sig(path + '::' + mi['name'], mi['inner']['function'])}")
                elif mi:
                    out.add(f"trait item {path}::{mi['name']}")
        elif k == "function":
            out.add(f"pub {fn_sig(path, v)}")
        elif k == "constant":
            out.add(f"pub const {path}: {ty(v['type'])}")
        elif k == "static":
            out.add(f"pub static {path}: {ty(v['type'])}")
        elif k == "type_alias":
            out.add(f"pub type {path}{generics(v['generics'])} = {ty(v['type'])}")
        elif k in ("macro", "proc_macro"):
            out.add(f"pub macro {path}")
        else:
            out.add(f"pub {k} {path}")

    visit(doc["root"], crate, frozenset())
    for line in sorted(out):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
