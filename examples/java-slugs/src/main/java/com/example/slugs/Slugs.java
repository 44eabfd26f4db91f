package com.example.slugs;

import org.apache.commons.lang3.StringUtils;

/** URL slugs from titles: lower case, ASCII letters and digits, words joined by dashes. */
public final class Slugs {
  private Slugs() {}

  /**
   * The slug of a title: accents removed ("Café" becomes "cafe"), every run of other
   * characters one dash, no dash at either end.
   */
  public static String slugify(String title) {
    String plain = StringUtils.stripAccents(title).toLowerCase();
    String dashed = plain.replaceAll("[^a-z0-9]", "-");
    return StringUtils.strip(dashed, "-");
  }
}
