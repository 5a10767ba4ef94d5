"""mkdocs hook: the site's home page is the README. docs/index.md stands in for it; its text is
replaced by the README's, whose links into docs/ ("docs/simulation.md", "docs/viewer_panda.png")
are relative to the repository's root and become relative to docs/."""
import os
import re


def on_page_markdown(markdown, page, config, **_kwargs):
    if page.file.src_uri != "index.md":
        return markdown
    readme = os.path.join(os.path.dirname(config["config_file_path"]), "README.md")
    with open(readme, encoding="utf-8") as f:
        return re.sub(r"\]\(docs/", "](", f.read())
