"""A schema with a full card: the real flights (tests/data/flights) as
tests/e2e/test_croissant.py and test_card.py build them."""

CARD = {
    "title": "New York City departures, January 2013",
    "license": "CC0-1.0",
    "creators": [{"name": "Hadley Wickham", "url": "https://github.com/hadley"},
                 "US Bureau of Transportation Statistics"],
    "citation": "@misc{nycflights13, author={Hadley Wickham}, "
                "title={nycflights13}, year={2021}}",
    "url": "https://github.com/tidyverse/nycflights13",
    "keywords": ["flights", "delays"],
    "version": "1.2.0",
    "rai": {"dataCollection": "On-time data of the BTS, for flights that "
                              "departed NYC in 2013.",
            "dataLimitations": "Two days of one month only.",
            "dataBiases": "Three airports; winter weather.",
            "personalSensitiveInformation": "None: no passengers.",
            "dataUseCases": "Teaching and tests of delay models."}}
FLIGHTS = {
    "name": "flights",
    "description": "Flights that departed New York City on 1 and 2 January "
                   "2013 (nycflights13), one record per flight.",
    "card": CARD,
    "features": {
        "dep_delay": "float", "arr_delay": "float",
        "carrier": {"type": "string", "required": True},
        "origin": "string", "dest": "string", "flight": "int64",
        "tailnum": "string", "distance": "int64"},
    "splits": {"hash": ["carrier", "flight"],
               "weights": {"train": 0.8, "eval": 0.2}},
}


# Feature names and card fields that Markdown, HTML or Python would read as
# syntax (issue 60): (case id, feature name, how the features table shows
# it). A name that inline code shows as itself is inline code; the others
# are escaped text (a line break is a space there).
HOSTILE_NAMES = [
    ("python_call_in_quotes", 'a"); import os; os.system("x") #',
     '`a"); import os; os.system("x") #`'),
    ("apostrophe", "it's", "`it's`"),
    ("backslashes", "back\\slash\\", "`back\\slash\\`"),
    ("newline", "two\nlines", "two lines"),
    ("closing_code_tag", "</code>", "&lt;/code&gt;"),
    ("script_tag", "<script>alert(1)</script>",
     "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("python_expression", "__import__('os').system('x')",
     "`__import__('os').system('x')`"),
    ("pipe_and_backtick", "a|b`c", "a\\|b\\`c"),
]
# The value every row holds in every column: HTML, a cell's end, code.
HOSTILE_VALUE = "<script>alert(2)</script>|`x`"
HOSTILE_CARD = {
    "title": "<img src=x onerror=alert(3)> #1",
    "license": "CC0-1.0",
    "creators": [{"name": "<b>Eve</b>", "email": "eve@example.org"}],
    "citation": "```\n<script>alert(4)</script>",
    "keywords": ["[link](javascript:alert(5))"],
    "rai": {"dataBiases": "*bold* _it_ <i>html</i>\n# not a heading"}}
HOSTILE = {
    "name": "hostile",
    "description": "<script>alert(6)</script>\n\n# not a heading",
    "card": HOSTILE_CARD,
    "features": {name: {"type": "string", "source": f"c{i}"}
                 for i, (_, name, _) in enumerate(HOSTILE_NAMES)},
}
