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
